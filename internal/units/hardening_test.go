package units_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// Both scripts do what an ordinary worker does (write to the working
// directory and to /tmp, use SQLite or the JIT) and then write "ok", the
// content read back from /tmp, and whether a directory the worker owns
// outside its working directory was writable ("rw") or not ("ro").
const (
	pythonWorker = `
import os, sqlite3, sys, time
open('/tmp/t', 'w').write('tmp')
db = sqlite3.connect('py.db')
db.execute('create table if not exists t (x)')
db.commit()
try:
    open(sys.argv[1] + '/f', 'w').write('x')
    other = 'rw'
except OSError:
    other = 'ro'
open('out', 'w').write('ok ' + open('/tmp/t').read() + ' ' + other)
while True:
    time.sleep(1000)
`
	nodeWorker = `
const fs = require('fs');
fs.writeFileSync('/tmp/t', 'tmp');
let other = 'rw';
try { fs.writeFileSync(process.argv[1] + '/f', 'x'); } catch (e) { other = 'ro'; }
// Enough work for V8 to JIT-compile the function (W+X memory).
const f = (n) => { let s = 0; for (let i = 0; i < n; i++) s += i % 7; return s; };
for (let i = 0; i < 2000; i++) f(1000);
fs.writeFileSync('out', 'ok ' + fs.readFileSync('/tmp/t', 'utf8') + ' ' + other);
setInterval(() => {}, 1 << 30);
`
)

var (
	testWorkerOnce sync.Once
	testWorkerErr  error
)

// installTestWorker builds the Go test worker and installs it in the
// sandbox at /usr/local/bin/flexiq-testworker.
func installTestWorker(t *testing.T, sb *sandbox.Sandbox) string {
	t.Helper()
	const inside = "/usr/local/bin/flexiq-testworker"
	testWorkerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "flexiq-units-worker-")
		if err != nil {
			testWorkerErr = err
			return
		}
		defer os.RemoveAll(dir)
		root, err := sandbox.ModuleRoot()
		if err != nil {
			testWorkerErr = err
			return
		}
		bin := filepath.Join(dir, "worker")
		cmd := exec.Command("go", "build", "-o", bin, "./test/worker")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			testWorkerErr = fmt.Errorf("building the test worker: %v\n%s", err, out)
			return
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			testWorkerErr = err
			return
		}
		testWorkerErr = os.WriteFile(fmt.Sprintf("/proc/%d/root%s", sb.PID, inside), b, 0o755)
	})
	if testWorkerErr != nil {
		t.Fatal(testWorkerErr)
	}
	return inside
}

// Each preset runs a real Python, Node and Go worker as an unprivileged
// system user: they start, do their work and keep running; strict keeps the file
// system read-only but for /tmp and the working directory. The exposure
// systemd-analyze gives each preset is logged, for the table in docs/workers.md.
func TestHardeningPresets(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 3*time.Minute)
	m := newManager(t, sb)
	goWorker := installTestWorker(t, sb)
	// A system user of its own, as the package's default user flexiq is:
	// systemd-analyze counts "nobody" as a risk of its own.
	const user = "flexiq-hard"
	sb.Sh(t, "id "+user+" >/dev/null 2>&1 || useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "+user)

	exposure := map[string]float64{}
	var mu sync.Mutex
	t.Cleanup(func() {
		if len(exposure) == 3 {
			t.Logf("systemd-analyze security, Go worker as a system user: none %.1f, default %.1f, strict %.1f",
				exposure["none"], exposure["default"], exposure["strict"])
		}
		if !(exposure["strict"] < exposure["default"] && exposure["default"] < exposure["none"]) {
			t.Errorf("exposure %v: want strict < default < none", exposure)
		}
	})

	for _, preset := range units.HardeningPresets {
		t.Run(preset, func(t *testing.T) {
			t.Parallel()
			pool := "hard_" + preset
			for slot, lang := range []string{"python", "node", "go"} {
				t.Run(lang, func(t *testing.T) {
					t.Parallel()
					dir := fmt.Sprintf("/var/lib/flexiq-hard/%s-%s", preset, lang)
					other := dir + "-other"
					sb.Sh(t, fmt.Sprintf("mkdir -p %[1]s %[2]s; chown %[3]s:%[3]s %[1]s %[2]s", dir, other, user))
					s := units.WorkerSpec{
						Pool: pool, Slot: slot + 1,
						User: user, Group: user,
						WorkingDirectory: dir,
						Hardening:        preset,
						StopTimeout:      5 * time.Second,
					}
					switch lang {
					case "python":
						s.Exec = []string{"/usr/bin/python3", "-c", pythonWorker, other}
					case "node":
						s.Exec = []string{"/usr/bin/node", "-e", nodeWorker, other}
					case "go":
						s.Exec = []string{goWorker, "--db", dir + "/flexiq.db", "--poll", "50ms"}
					}
					unit := start(t, ctx, m, sb, s)

					if lang == "go" {
						checkGoWorker(t, sb, unit, dir)
						sc := analyzeSecurity(t, sb, unit)
						mu.Lock()
						exposure[preset] = sc
						mu.Unlock()
					} else {
						want := "ok tmp rw"
						if preset == units.HardeningStrict {
							want = "ok tmp ro"
						}
						var got string
						ok, state := sandbox.Eventually(30*time.Second, func() (bool, string) {
							if out, err := sb.Exec(ctx, "cat", dir+"/out"); err == nil {
								got = strings.TrimSpace(out)
							}
							st := show(t, ctx, sb, unit, "ActiveState")["ActiveState"]
							return got != "" || st != "active", st
						})
						if !ok || got != want {
							logs, _ := sb.Exec(ctx, "journalctl", "-u", unit, "--no-pager", "-o", "cat")
							t.Fatalf("%s (%s): out %q, want %q; unit %s\n%s", unit, lang, got, want, state, logs)
						}
					}
					// Still running after its work: nothing it did later got it killed.
					time.Sleep(time.Second)
					if got := show(t, ctx, sb, unit, "ActiveState", "SubState"); got["ActiveState"] != "active" || got["SubState"] != "running" {
						logs, _ := sb.Exec(ctx, "journalctl", "-u", unit, "--no-pager", "-o", "cat")
						t.Fatalf("%s: %v\n%s", unit, got, logs)
					}
					checkPresetProperties(t, sb, unit, preset, dir)
				})
			}
		})
	}
}

// checkGoWorker enqueues a job in the database the Go test worker created
// in its working directory, and waits for the worker to complete it. SQLite
// runs inside the sandbox (python3's), since the database is not on the host.
func checkGoWorker(t *testing.T, sb *sandbox.Sandbox, unit, dir string) {
	t.Helper()
	ctx := testContext(t, 40*time.Second)
	waitFor(t, ctx, unit+" to start working", func() bool {
		out, _ := sb.Exec(ctx, "journalctl", "-u", unit, "--no-pager", "-o", "cat")
		return strings.Contains(out, "started id=")
	})
	db := dir + "/flexiq.db"
	sql := func(stmt string) string {
		const script = `import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=10)
rows = db.execute(sys.argv[2]).fetchall()
db.commit()
print(rows[0][0] if rows else '')`
		out, err := sb.Exec(ctx, "/usr/bin/python3", "-c", script, db, stmt)
		if err != nil {
			t.Fatalf("%s: %v\n%s", stmt, err, out)
		}
		return strings.TrimSpace(out)
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	sql(`insert into jobs (id, queue, status, payload, created_at, scheduled_at) values ('hard', 'default', 0, '{"duration_ms":10}', ` + now + `, ` + now + `)`)
	ok, state := sandbox.Eventually(20*time.Second, func() (bool, string) {
		st := sql(`select status from jobs where id = 'hard'`)
		return st == "2", "status " + st
	})
	if !ok {
		logs, _ := sb.Exec(ctx, "journalctl", "-u", unit, "--no-pager", "-o", "cat")
		t.Fatalf("%s did not complete its job: %s\n%s", unit, state, logs)
	}
}

// checkPresetProperties compares what systemctl shows with the preset.
func checkPresetProperties(t *testing.T, sb *sandbox.Sandbox, unit, preset, dir string) {
	t.Helper()
	ctx := testContext(t, 10*time.Second)
	want := map[string]string{
		"NoNewPrivileges": "no", "PrivateTmp": "no", "ProtectSystem": "no", "ProtectHome": "no",
		"ProtectKernelTunables": "no", "PrivateDevices": "no", "RestrictNamespaces": "no",
		"SystemCallArchitectures": "", "UMask": "0022", "ReadWritePaths": "", "ProtectProc": "default", "RestrictAddressFamilies": "~",
	}
	switch preset {
	case units.HardeningDefault:
		for k, v := range map[string]string{"NoNewPrivileges": "yes", "PrivateTmp": "yes", "ProtectSystem": "full", "ProtectKernelTunables": "yes",
			"SystemCallArchitectures": "native", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_NETLINK AF_UNIX"} {
			want[k] = v
		}
	case units.HardeningStrict:
		for k, v := range map[string]string{"NoNewPrivileges": "yes", "PrivateTmp": "yes", "ProtectSystem": "strict", "ProtectHome": "read-only",
			"ProtectKernelTunables": "yes", "PrivateDevices": "yes", "RestrictNamespaces": "yes", "SystemCallArchitectures": "native",
			"UMask": "0027", "ReadWritePaths": dir, "ProtectProc": "invisible", "CapabilityBoundingSet": "",
			"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX"} {
			want[k] = v
		}
	}
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, k)
	}
	got := show(t, ctx, sb, unit, names...)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s (%s): %s=%q, want %q", unit, preset, k, got[k], v)
		}
	}
}

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)

// analyzeSecurity is systemd-analyze's exposure score of unit (0 to 10,
// lower is safer).
func analyzeSecurity(t *testing.T, sb *sandbox.Sandbox, unit string) float64 {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	// Exits non-zero above its default threshold; the score is what counts.
	out, _ := sb.Exec(ctx, "systemd-analyze", "security", "--no-pager", unit)
	m := exposureRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security %s: no exposure level in\n%s", unit, out)
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// EnvironmentFile is read by systemd as root, so a secret can live in a file
// its worker's user cannot read; "-" makes a missing file fine, and without
// it a missing file fails the start.
func TestEnvironmentFiles(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 30*time.Second)
	m := newManager(t, sb)
	sb.Sh(t, `mkdir -p /etc/flexiq-envtest
printf 'SECRET=s3cr3t\nOVERRIDE=file\n' > /etc/flexiq-envtest/secret.env
chmod 0600 /etc/flexiq-envtest/secret.env`)

	unit := start(t, ctx, m, sb, units.WorkerSpec{
		Pool: "envfile", Slot: 1,
		Exec:             []string{"/bin/sh", "-c", `echo "envfile secret=$SECRET override=$OVERRIDE"; cat /etc/flexiq-envtest/secret.env || echo unreadable; exec sleep 1000`},
		User:             "nobody",
		Environment:      map[string]string{"OVERRIDE": "env"},
		EnvironmentFiles: []string{"/etc/flexiq-envtest/secret.env", "-/etc/flexiq-envtest/missing.env"},
	})
	want := "EnvironmentFiles=/etc/flexiq-envtest/secret.env (ignore_errors=no)\nEnvironmentFiles=/etc/flexiq-envtest/missing.env (ignore_errors=yes)"
	if out, err := sb.Exec(ctx, "systemctl", "show", "-p", "EnvironmentFiles", unit); err != nil || strings.TrimSpace(out) != want {
		t.Errorf("systemctl show: %q (%v), want %q", out, err, want)
	}
	ok, state := sandbox.Eventually(10*time.Second, func() (bool, string) {
		out, _ := sb.Exec(ctx, "journalctl", "-u", unit, "--no-pager", "-o", "cat")
		return strings.Contains(out, "envfile secret=s3cr3t override=file") && strings.Contains(out, "unreadable"), out
	})
	if !ok {
		t.Errorf("worker output: want the secret from the file (which overrides Environment) and the file unreadable to the worker:\n%s", state)
	}

	missing := units.WorkerSpec{Pool: "envfile", Slot: 2, Exec: []string{"/bin/sleep", "1000"},
		EnvironmentFiles: []string{"/etc/flexiq-envtest/missing.env"}}
	t.Cleanup(func() { removeUnit(t, sb, units.UnitName("envfile", 2)) })
	if err := m.StartWorker(ctx, missing); err == nil {
		t.Error("a missing environment file without \"-\" did not fail the start")
	}
}

// The revision reaches the unit's Description, and ListWorkers reads it back.
func TestWorkerRevision(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 30*time.Second)
	m := newManager(t, sb)
	s := sleeper("rev", 1)
	s.Revision = "3f2a9c"
	unit := start(t, ctx, m, sb, s)
	start(t, ctx, m, sb, sleeper("rev", 2))
	if got := show(t, ctx, sb, unit, "Description")["Description"]; got != "flexiq-scaled worker rev/1 rev 3f2a9c" {
		t.Errorf("Description %q", got)
	}
	ws, err := m.ListWorkers(ctx, "rev")
	if err != nil || len(ws) != 2 {
		t.Fatalf("ListWorkers: %v, %v", ws, err)
	}
	if ws[0].Revision != "3f2a9c" || ws[0].Description != "flexiq-scaled worker rev/1 rev 3f2a9c" || ws[1].Revision != "" {
		t.Errorf("listed: %+v", ws)
	}
}
