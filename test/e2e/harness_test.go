// Package e2e runs the real flexiq-scaled binary as a Type=notify service
// under a real systemd (the sandbox), with the test worker as its workers
// and a flexiq-schema SQLite database as the queue.
package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// Binaries built once per run into the checkout, which the sandbox sees at
// the same path.
var binDir string

// The queue databases live in a host directory that the sandbox sees as
// dbInside: under /var/lib, as on a real host, since the daemon's unit hides
// /tmp and /home (where a checkout may well be) from it.
var dbHost string

const dbInside = "/var/lib/flexiq-e2e"

// binds are the sandboxes' binds: the checkout, and dbHost at dbInside.
var binds []string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse() // for -run, which buildInBackground reads
	if why := sandbox.Unsupported(); why == "" {
		root, err := sandbox.ModuleRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		binDir = filepath.Join(root, "bin", "e2e")
		// Every test needs these three: side by side, before the tests.
		bins := map[string]string{"./cmd/flexiq-scaled": "flexiq-scaled", "./cmd/flexiq-scaled-plot": "flexiq-scaled-plot", "./test/worker": "flexiq-testworker"}
		errs := make(chan error, len(bins))
		for pkg, name := range bins {
			go func() {
				cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, name), pkg)
				cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("building %s: %v\n%s", pkg, err, out)
					return
				}
				errs <- nil
			}()
		}
		failed := false
		for range bins {
			if err := <-errs; err != nil {
				fmt.Fprintln(os.Stderr, err)
				failed = true
			}
		}
		if failed {
			return 1
		}
		// The rest builds while the first tests run.
		defineArtefacts(root)
		ctx, cancel := context.WithCancel(context.Background())
		wait := buildInBackground(ctx)
		defer wait()
		defer cancel()
	}
	if root, err := sandbox.ModuleRoot(); err == nil {
		var err error
		if dbHost, err = os.MkdirTemp("", "flexiq-e2e-db-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dbHost)
		binds = []string{root, dbHost + ":" + dbInside}
	}
	code := sandbox.Main(m, sandbox.Options{Name: "e2e", Binds: binds})
	if err := stopSecond(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: stopping the second sandbox: %v\n", err)
		return 1
	}
	return code
}

// env is one test's view of the sandbox with the daemon installed.
type env struct {
	t  testing.TB
	sb *sandbox.Sandbox
	// dbPath is the queue database as the sandbox sees it.
	dbPath string
	db     *sql.DB
	// since is when the test began: journal queries see only its entries,
	// not those of earlier tests (or runs) that used the same names.
	since string
}

const daemonUnit = "flexiq-scaled.service"

// Journal matches for the source events, shared by the sources' tests.
const (
	sourceErrorID     = "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b05"
	sourceRecoveredID = "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b08"
)

// setup installs the daemon binary and unit into the sandbox (once), creates
// an empty queue database for this test, and arranges for the daemon to be
// stopped, draining every worker, when the test ends.
func setup(t testing.TB) *env {
	t.Helper()
	sb := sandboxFor(t)
	e := &env{t: t, sb: sb, since: fmt.Sprintf("--since=@%d", time.Now().Unix()-1)}
	root, _ := sandbox.ModuleRoot()
	unitFile, err := os.ReadFile(filepath.Join(root, "systemd", daemonUnit))
	if err != nil {
		t.Fatal(err)
	}
	e.sh(`id flexiq >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin flexiq
install -m 0755 ` + binDir + `/flexiq-scaled /usr/bin/flexiq-scaled
install -D -m 0755 ` + binDir + `/flexiq-scaled-plot /usr/libexec/flexiq-scaled/flexiq-scaled-plot
install -m 0755 ` + binDir + `/flexiq-testworker /usr/local/bin/flexiq-testworker
mkdir -p /etc/flexiq-scaled /var/lib/flexiq /etc/systemd/system/flexiq-scaled.service.d
chown flexiq:flexiq /var/lib/flexiq`)
	e.write("/etc/systemd/system/"+daemonUnit, string(unitFile))
	// Short watchdog and restart delays keep the tests quick; the shipped
	// values are for production.
	e.write("/etc/systemd/system/flexiq-scaled.service.d/50-test.conf", "[Service]\nWatchdogSec=4s\nRestartSec=500ms\n")
	e.sh("systemctl daemon-reload")

	// The test writes the database through the host's path; the daemon and
	// the workers read it at dbInside. (Not through /proc/PID/root: SQLite
	// resolves that symlink and would open the host's own path.)
	name := strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name()))
	hostDB := filepath.Join(dbHost, name+".db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(hostDB + suffix)
	}
	e.dbPath = filepath.Join(dbInside, name+".db")
	e.db, err = flexiqdb.Create(hostDB)
	if err != nil {
		t.Fatal(err)
	}
	e.sh("chown flexiq:flexiq " + dbInside + " " + e.dbPath + "*")
	t.Cleanup(func() {
		e.db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// The test is over, and so is the work its workers hold: once the
		// daemon drains (and so starts no worker), they are killed, or the
		// stop would wait out every job in hand, up to 20 s in some tests.
		// The drain itself is what TestStopDrainsAndKillsAtDrainTimeout,
		// TestStopLeavesNothingRunning and others test.
		sb.Exec(ctx, "sh", "-c", killWorkersOnceDraining)
		if out, err := sb.Exec(ctx, "systemctl", "stop", daemonUnit); err != nil {
			t.Errorf("stopping the daemon: %v\n%s", err, out)
		}
		sb.Exec(ctx, "systemctl", "reset-failed")
		sb.Exec(ctx, "sh", "-c", "rm -rf /etc/systemd/system/flexiq-*.d /etc/systemd/system/flexiq-scaled.service.d/90-*.conf; systemctl daemon-reload")
	})
	return e
}

// killWorkersOnceDraining asks the daemon to stop, waits (5 s at most) for
// it to leave the active states, and SIGKILLs every worker unit.
const killWorkersOnceDraining = `systemctl stop --no-block ` + daemonUnit + `
for i in $(seq 100); do
	case $(systemctl show -P ActiveState ` + daemonUnit + `) in active|activating|reloading) sleep 0.05 ;; *) break ;; esac
done
systemctl kill --signal=SIGKILL 'flexiq-*@*.service' 2>/dev/null || true`

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *env) sh(script string) string {
	e.t.Helper()
	return e.sb.Sh(e.t, script)
}

func (e *env) write(path, content string) {
	e.t.Helper()
	if err := e.sb.WriteFile(path, content); err != nil {
		e.t.Fatal(err)
	}
}

// poolConfig is a pool of test workers on this test's database, ticking
// every second. extra adds keys, and may override exec and poll_interval_sec.
func (e *env) poolConfig(pool, extra string) string {
	defaults := ""
	for key, line := range map[string]string{
		"exec =":              `exec = ["/usr/local/bin/flexiq-testworker", "--poll", "50ms"]`,
		"poll_interval_sec =": "poll_interval_sec = 1",
	} {
		if !strings.Contains(extra, key) {
			defaults += line + "\n"
		}
	}
	return fmt.Sprintf(`
[pools.%s]
environment = { FLEXIQ_DB_PATH = %q }
%s%s
[pools.%s.source]
type = "flexiq-sqlite"
path = %q
`, pool, e.dbPath, defaults, extra, pool, e.dbPath)
}

func (e *env) configure(toml string) {
	e.t.Helper()
	e.write("/etc/flexiq-scaled/config.toml", toml)
}

func (e *env) startDaemon() {
	e.t.Helper()
	e.sh("systemctl start " + daemonUnit)
}

// workers lists the pool's worker units in the given states (e.g. "active").
func (e *env) workers(pool string, states ...string) []string {
	e.t.Helper()
	args := []string{"systemctl", "list-units", "--plain", "--no-legend", "--all", "flexiq-" + pool + "@*.service"}
	out, err := e.sb.Exec(e.ctx(), args...)
	if err != nil {
		e.t.Fatal(err)
	}
	var units []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		if len(states) == 0 || contains(states, f[2]) {
			units = append(units, f[0])
		}
	}
	return units
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// waitWorkers waits until the pool has exactly n active workers.
func (e *env) waitWorkers(pool string, n int, within time.Duration) {
	e.t.Helper()
	e.eventually(within, fmt.Sprintf("%d active workers in pool %s", n, pool), func() (bool, string) {
		ws := e.workers(pool, "active")
		return len(ws) == n, fmt.Sprintf("active: %v", ws)
	})
}

// eventually waits for cond, and fails the test with the daemon's journal
// if it does not come true within the time.
func (e *env) eventually(within time.Duration, what string, cond func() (bool, string)) {
	e.t.Helper()
	if ok, state := sandbox.Eventually(within, cond); !ok {
		e.fatalf("after %s, still no %s (%s)", within, what, state)
	}
}

// errorf and fatalf report a failure with the daemon's recent journal, which
// says what it saw and decided.
func (e *env) errorf(format string, args ...any) {
	e.t.Helper()
	e.t.Errorf(format+"\ndaemon journal:\n%s", append(args, e.journalText("-u", daemonUnit, "-n", "60"))...)
}

func (e *env) fatalf(format string, args ...any) {
	e.t.Helper()
	e.t.Fatalf(format+"\ndaemon journal:\n%s", append(args, e.journalText("-u", daemonUnit, "-n", "60"))...)
}

func (e *env) journalText(args ...string) string {
	out, _ := e.sb.Exec(context.Background(), append([]string{"journalctl", "--no-pager", "-o", "short-monotonic", e.since}, args...)...)
	return out
}

// entries returns this test's journal entries that match the arguments.
func (e *env) entries(args ...string) []sandbox.JournalEntry {
	e.t.Helper()
	entries, err := e.sb.Journal(e.ctx(), append([]string{e.since}, args...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return entries
}

// unitProp reads one property of a unit.
func (e *env) unitProp(unit, prop string) string {
	e.t.Helper()
	return strings.TrimSpace(e.sh("systemctl show -P " + prop + " " + unit))
}

func (e *env) daemonPID() int {
	pid, _ := strconv.Atoi(e.unitProp(daemonUnit, "MainPID"))
	return pid
}

// enqueue adds n pending jobs of the given duration.
func (e *env) enqueue(n int, d time.Duration) {
	e.t.Helper()
	jobs := make([]flexiqdb.Job, n)
	for i := range jobs {
		jobs[i] = flexiqdb.Job{DurationMs: int(d.Milliseconds())}
	}
	if err := flexiqdb.EnqueueMany(e.db, jobs); err != nil {
		e.t.Fatal(err)
	}
}

// observed is what `flexiq-scaled observe` prints.
type observed struct {
	Pending, Running, Paused int64
	OldestAgeSec             *float64 `json:"oldest_age_sec"`
}

// observe runs `flexiq-scaled observe` inside the sandbox: one read of the
// pool's source, as the daemon makes it. It returns the observation, the
// command's output, and an error when the source failed.
func (e *env) observe(pool string) (observed, string, error) {
	return e.observeConfig("/etc/flexiq-scaled/config.toml", pool)
}

// observeConfig is observe with another configuration file.
func (e *env) observeConfig(config, pool string) (observed, string, error) {
	out, err := e.sb.Exec(e.ctx(), "flexiq-scaled", "observe", "--timeout", "15s", "--config", config, pool)
	var o observed
	if err == nil {
		err = json.Unmarshal([]byte(strings.TrimSpace(out)), &o)
	}
	return o, out, err
}
