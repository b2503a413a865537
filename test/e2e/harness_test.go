// Package e2e runs the real flexiq-scaled binary as a Type=notify service
// under a real systemd (the sandbox), with the test worker as its workers
// and a flexiq-schema SQLite database as the queue.
package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/harness"
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
		// Every test needs these three: side by side, before the tests.
		if binDir, err = harness.Build("e2e",
			harness.Bin{Pkg: "./cmd/flexiq-scaled", Name: "flexiq-scaled"},
			harness.Bin{Pkg: "./cmd/flexiq-scaled-plot", Name: "flexiq-scaled-plot"},
			harness.Bin{Pkg: "./test/worker", Name: "flexiq-testworker"}); err != nil {
			fmt.Fprintln(os.Stderr, err)
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
	*harness.Env
}

const daemonUnit = harness.DaemonUnit

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
	// The sandbox outlives the test: journal queries see only its entries,
	// not those of earlier tests (or runs) that used the same names.
	e := &env{&harness.Env{T: t, SB: sb, Since: fmt.Sprintf("--since=@%d", time.Now().Unix()-1), JournalLines: 60}}
	harness.InstallDaemon(t, sb, harness.Daemon{
		BinDir: binDir,
		Tools: map[string]string{
			"flexiq-scaled-plot": "/usr/libexec/flexiq-scaled/flexiq-scaled-plot",
			"flexiq-testworker":  "/usr/local/bin/flexiq-testworker",
		},
		DropIn: "WatchdogSec=4s\nRestartSec=500ms\n",
	})
	e.CreateQueue(dbHost, dbInside)
	t.Cleanup(func() {
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
`, pool, e.DBPath, defaults, extra, pool, e.DBPath)
}

// waitWorkers waits until the pool has exactly n active workers.
func (e *env) waitWorkers(pool string, n int, within time.Duration) {
	e.T.Helper()
	e.Eventually(within, fmt.Sprintf("%d active workers in pool %s", n, pool), func() (bool, string) {
		ws := e.Workers(pool, "active")
		return len(ws) == n, fmt.Sprintf("active: %v", ws)
	})
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
	out, err := e.SB.Exec(e.Ctx(), "flexiq-scaled", "observe", "--timeout", "15s", "--config", config, pool)
	var o observed
	if err == nil {
		err = json.Unmarshal([]byte(strings.TrimSpace(out)), &o)
	}
	return o, out, err
}
