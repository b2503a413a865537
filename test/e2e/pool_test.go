package e2e

import (
	"strings"
	"testing"
	"time"
)

// `pool add` writes a drop-in with flexiq autoscale's flags and reloads the
// running daemon, which starts the pool and scales it; `pool rm` removes the
// drop-in, and the daemon drains the pool's workers away.
func TestPoolAddRm(t *testing.T) {
	parallel(t)
	e := setup(t)
	t.Cleanup(func() { e.SB.Exec(e.Ctx(), "rm", "-rf", "/etc/flexiq-scaled/conf.d") })
	e.Configure("[daemon]\npoll_interval_sec = 1\n")
	e.StartDaemon()

	out, errs, code := e.run("flexiq-scaled", "pool", "add", "added", "--db", e.DBPath,
		"--min-workers", "1", "--max-workers", "3", "--target-queue-depth", "5", "--poll-interval", "1",
		"--scale-down-window", "0", "--drain-timeout", "10", "--env", "FLEXIQ_DB_PATH="+e.DBPath,
		"--", "/usr/local/bin/flexiq-testworker", "--poll", "50ms")
	if code != 0 {
		e.Fatalf("pool add: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "wrote /etc/flexiq-scaled/conf.d/added.toml") || !strings.Contains(out, "added") {
		t.Errorf("pool add printed %q", out)
	}
	if mode := strings.TrimSpace(e.Sh("stat -c %a /etc/flexiq-scaled/conf.d/added.toml")); mode != "640" {
		t.Errorf("drop-in mode %s, want 640", mode)
	}
	e.waitWorkers("added", 1, 15*time.Second)
	e.Enqueue(40, 3*time.Second)
	e.waitWorkers("added", 3, 20*time.Second)

	// A bad pool is refused before the daemon hears of it, and leaves
	// nothing behind.
	out, errs, code = e.run("flexiq-scaled", "pool", "add", "bad", "--db", e.DBPath,
		"--min-workers", "4", "--max-workers", "2", "--", "/usr/local/bin/flexiq-testworker")
	if code != 1 || !strings.Contains(errs, "conf.d/bad.toml: pools.bad.max_workers") {
		t.Errorf("bad pool add: exit %d\n%s%s", code, out, errs)
	}
	if got := e.Sh("ls /etc/flexiq-scaled/conf.d"); strings.TrimSpace(got) != "added.toml" {
		t.Errorf("conf.d holds %q, want added.toml only", got)
	}

	out, errs, code = e.run("flexiq-scaled", "pool", "rm", "added")
	if code != 0 {
		e.Fatalf("pool rm: exit %d\n%s%s", code, out, errs)
	}
	e.Eventually(30*time.Second, "worker of pool added left", func() (bool, string) {
		ws := e.Workers("added")
		return len(ws) == 0, strings.Join(ws, " ")
	})
}
