// Package services tests service pools (issue 19) against the real
// systemd, nginx and Prometheus of Debian, in a sandbox: replicas of
// test/service behind nginx, traffic from test/loadgen inside the
// sandbox, the daemon scaling them. Each test boots a sandbox of its own
// (with its own network namespace). The zero-loss and gang tests run one
// after the other, alone: their figures and latencies need a quiet
// machine. The restart and Prometheus tests, which measure nothing and
// wait with generous deadlines, then run side by side (t.Parallel: Go
// runs them after the sequential ones), to keep CI short.
//
// The figures are on FIGURE lines:
//
//	go test -count=1 -v ./test/services/ 2>&1 | grep FIGURE
package services

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/loadgen"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// binDir holds the binaries built once per run, in the checkout, which every
// sandbox sees at the same path.
var binDir string

const daemonUnit = "flexiq-scaled.service"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if why := sandbox.Unsupported(); why != "" {
		fmt.Fprintln(os.Stderr, "service pool tests skipped: "+why)
		return m.Run()
	}
	root, err := sandbox.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = filepath.Join(root, "bin", "services")
	for pkg, name := range map[string]string{
		"./cmd/flexiq-scaled":        "flexiq-scaled",
		"./test/service":             "flexiq-testservice",
		"./test/loadgen/cmd/loadgen": "flexiq-loadgen",
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, name), pkg)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	return m.Run()
}

// env is one test's sandbox with the daemon, the test service and the load
// generator installed.
type env struct {
	t  *testing.T
	sb *sandbox.Sandbox
}

func boot(t *testing.T) *env {
	t.Helper()
	if why := sandbox.Unsupported(); why != "" {
		t.Skip("service pool tests skipped: " + why)
	}
	root, _ := sandbox.ModuleRoot()
	name := strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name()))
	name = strings.TrimPrefix(name, "test")
	if len(name) > 22 {
		name = name[:22]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t0 := time.Now()
	sb, err := sandbox.Start(ctx, sandbox.Options{
		Name:        fmt.Sprintf("svc-%s-%d", strings.Trim(name, "-"), os.Getpid()%10000),
		Binds:       []string{root},
		OwnerPID:    os.Getpid(),
		StopTimeout: 5 * time.Second,
	})
	cancel()
	if err != nil {
		t.Fatalf("booting the sandbox: %v", err)
	}
	t.Logf("sandbox %s booted in %.2fs", sb.Name, time.Since(t0).Seconds())
	e := &env{t: t, sb: sb}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			out, _ := sb.Exec(ctx, "sh", "-c", "journalctl --no-pager -n 150 -u flexiq-scaled -u 'flexiq-*' -u nginx")
			t.Logf("journal at failure:\n%s", out)
		}
		if err := sb.Stop(ctx); err != nil {
			t.Errorf("stopping the sandbox: %v", err)
		}
	})
	unitFile, err := os.ReadFile(filepath.Join(root, "systemd", daemonUnit))
	if err != nil {
		t.Fatal(err)
	}
	e.sh(`id flexiq >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin flexiq
install -m 0755 ` + binDir + `/flexiq-scaled /usr/bin/flexiq-scaled
install -m 0755 ` + binDir + `/flexiq-testservice /usr/local/bin/flexiq-testservice
install -m 0755 ` + binDir + `/flexiq-loadgen /usr/local/bin/flexiq-loadgen
mkdir -p /etc/flexiq-scaled`)
	e.write("/etc/systemd/system/"+daemonUnit, string(unitFile))
	e.write("/etc/systemd/system/flexiq-scaled.service.d/50-test.conf", "[Service]\nWatchdogSec=10s\nRestartSec=500ms\n")
	e.sh("systemctl daemon-reload")
	return e
}

// figure logs a measurement in a greppable form.
func (e *env) figure(name string, kv ...any) {
	e.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "FIGURE service=%s", name)
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		if d, ok := v.(time.Duration); ok {
			v = fmt.Sprintf("%.3fs", d.Seconds())
		}
		fmt.Fprintf(&b, " %v=%v", kv[i], v)
	}
	e.t.Log(b.String())
}

func (e *env) sh(script string) string {
	e.t.Helper()
	return e.sb.Sh(e.t, script)
}

// try runs a command inside without failing the test.
func (e *env) try(argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return e.sb.Exec(ctx, argv...)
}

func (e *env) write(path, content string) {
	e.t.Helper()
	if err := e.sb.WriteFile(path, content); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) eventually(within time.Duration, what string, cond func() (bool, string)) {
	e.t.Helper()
	if ok, state := sandbox.Eventually(within, cond); !ok {
		e.t.Fatalf("%s: not within %s; last: %s", what, within, state)
	}
}

// configure writes config.toml and the files it names.
func (e *env) configure(toml string, files map[string]string) {
	e.t.Helper()
	for path, content := range files {
		e.write(path, content)
	}
	e.write("/etc/flexiq-scaled/config.toml", toml)
}

func (e *env) startDaemon() {
	e.t.Helper()
	e.sh("systemctl start " + daemonUnit)
}

// cli runs the flexiq-scaled command inside and fails the test on error.
func (e *env) cli(args ...string) string {
	e.t.Helper()
	out, err := e.try(append([]string{"/usr/bin/flexiq-scaled"}, args...)...)
	if err != nil {
		e.t.Fatalf("flexiq-scaled %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// replica is one entry of the discovery JSON file, as the tests read it.
type replica struct {
	Slot    int            `json:"slot"`
	Unit    string         `json:"unit"`
	Address string         `json:"address"`
	Ports   map[string]int `json:"ports"`
	Rank    int            `json:"rank"`
}

// discovered reads /run/flexiq-scaled/discovery/POOL.json; nil when it is
// not there yet.
func (e *env) discovered(pool string) ([]replica, error) {
	out, err := e.try("cat", "/run/flexiq-scaled/discovery/"+pool+".json")
	if err != nil {
		return nil, nil
	}
	var f struct {
		Replicas []replica `json:"replicas"`
	}
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		return nil, fmt.Errorf("discovery file of %s: %v\n%s", pool, err, out)
	}
	return f.Replicas, nil
}

// waitDiscovered waits until the pool's discovery file lists n replicas.
func (e *env) waitDiscovered(pool string, n int, within time.Duration) []replica {
	e.t.Helper()
	var got []replica
	e.eventually(within, fmt.Sprintf("%d replicas of %s in discovery", n, pool), func() (bool, string) {
		r, err := e.discovered(pool)
		if err != nil {
			e.t.Fatal(err)
		}
		got = r
		return len(r) == n, fmt.Sprintf("%d listed: %+v", len(r), r)
	})
	return got
}

// units lists the pool's worker units in the given states.
func (e *env) units(pool string, states ...string) []string {
	e.t.Helper()
	out, _ := e.try("systemctl", "list-units", "--all", "--plain", "--no-legend", "--state="+strings.Join(states, ","), "flexiq-"+pool+"@*.service")
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "flexiq-") {
			names = append(names, f[0])
		}
	}
	return names
}

// startNginx starts Debian's nginx with one site of its own in place of
// Debian's default site.
func (e *env) startNginx(site string) {
	e.t.Helper()
	e.sh("rm -f /etc/nginx/sites-enabled/default")
	e.write("/etc/nginx/sites-enabled/flexiq-test", site)
	e.sh("systemctl start nginx.service")
}

// loadgen runs the load generator inside the sandbox (whose loopback
// nginx listens on) and returns its result.
func (e *env) loadgen(ctx context.Context, url string, rate float64, d time.Duration) (loadgen.Result, error) {
	cmd := e.sb.Command(ctx, "/usr/local/bin/flexiq-loadgen", "-url", url,
		"-rate", fmt.Sprint(rate), "-duration", d.String(), "-timeout", "5s", "-json")
	out, err := cmd.Output()
	var r loadgen.Result
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		return r, fmt.Errorf("loadgen: %v (%v): %s", jerr, err, out)
	}
	return r, nil
}
