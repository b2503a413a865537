package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
)

// A burst scales the pool up to the number the policy predicts, and once the
// queue is empty and the scale-down window has passed it scales back down.
// The decisions are in the journal under the pool's FLEXIQ_POOL.
func TestBurstScalesUpThenDown(t *testing.T) {
	parallel(t)
	e := setup(t)
	e.Configure(e.poolConfig("burst", `
min_workers = 1
max_workers = 5
target_queue_depth_per_worker = 10
threads_per_worker = 1
target_utilisation = 1.0
scale_down_window_sec = 4
`))
	e.StartDaemon()
	e.waitWorkers("burst", 1, 10*time.Second)
	if st := e.UnitProp(daemonUnit, "StatusText"); !strings.HasPrefix(st, "burst 1/5 workers") {
		t.Errorf("StatusText = %q, want it to start with %q", st, "burst 1/5 workers")
	}

	// 40 pending jobs: depth = ceil(40/10) = 4 workers; at utilisation 1.0
	// the running jobs ask for no more than the workers running them.
	e.Enqueue(40, 1500*time.Millisecond)
	e.waitWorkers("burst", 4, 15*time.Second)
	// Never more than predicted while the burst is worked off.
	for i := 0; i < 5; i++ {
		if n := len(e.Workers("burst", "active", "activating")); n > 4 {
			e.Fatalf("%d workers, the policy allows 4 for this burst", n)
		}
		time.Sleep(300 * time.Millisecond)
	}
	e.Eventually(60*time.Second, "the burst worked off", func() (bool, string) {
		n, _ := flexiqdb.Count(e.DB, flexiqdb.StatusComplete)
		return n == 40, fmt.Sprintf("%d complete", n)
	})
	e.waitWorkers("burst", 1, 20*time.Second)

	entries := e.Entries("FLEXIQ_POOL=burst", "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01")
	var up, down bool
	for _, en := range entries {
		switch en.Field("FLEXIQ_ACTION") {
		case "scale-up":
			up = up || en.Field("FLEXIQ_DESIRED") == "4"
		case "scale-down":
			down = down || en.Field("FLEXIQ_DESIRED") == "1"
		}
	}
	if !up || !down {
		t.Errorf("journal decisions for pool burst: scale-up to 4 %v, scale-down to 1 %v; entries: %d", up, down, len(entries))
	}
	// Every worker's own output is in the journal under the pool's field too.
	if out := e.JournalText("FLEXIQ_POOL=burst", "_COMM=flexiq-testwork"); !strings.Contains(out, "claimed job") {
		t.Errorf("no worker output under FLEXIQ_POOL=burst:\n%s", out)
	}
}

// A worker that ignores SIGTERM is SIGKILLed at drain_timeout_sec, and
// `systemctl stop` drains every pool and leaves no flexiq unit loaded.
func TestStopDrainsAndKillsAtDrainTimeout(t *testing.T) {
	parallel(t)
	e := setup(t)
	e.Configure(e.poolConfig("stubborn", `
exec = ["/usr/local/bin/flexiq-testworker", "--ignore-sigterm"]
min_workers = 2
drain_timeout_sec = 2
`) + e.poolConfig("polite", "min_workers = 1\n"))
	e.StartDaemon()
	e.waitWorkers("stubborn", 2, 10*time.Second)
	e.waitWorkers("polite", 1, 10*time.Second)

	t0 := time.Now()
	e.Sh("systemctl stop " + daemonUnit)
	took := time.Since(t0)
	if took < 2*time.Second {
		t.Errorf("stop took %s; the stubborn workers should have held it for their 2 s drain timeout", took)
	}
	if left := e.Workers("*"); len(left) > 0 {
		t.Errorf("units left loaded after stop: %v", left)
	}
	if out := e.JournalText("-u", "flexiq-stubborn@1.service"); !strings.Contains(out, "Killing") {
		t.Errorf("no SIGKILL at the drain timeout in the worker's journal:\n%s", out)
	}
	if out := e.JournalText("-u", daemonUnit); !strings.Contains(out, "all workers drained") {
		t.Errorf("the daemon did not report a full drain:\n%s", out)
	}
}

// A crashed worker is replaced, and a crash-looping slot backs off
// exponentially instead of spinning.
func TestCrashedWorkerIsReplacedWithBackoff(t *testing.T) {
	e := setup(t)
	e.Configure(e.poolConfig("crashy", `
exec = ["/usr/local/bin/flexiq-testworker", "--crash-after", "300ms"]
min_workers = 1
max_workers = 1
`))
	e.StartDaemon()
	time.Sleep(12 * time.Second)
	entries := e.Entries("FLEXIQ_POOL=crashy", "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b04")
	// With 1 s doubling (1+2+4 s of backoff, plus a tick each), a slot
	// crashing every 0.3 s is restarted a handful of times in 12 s, not
	// forty.
	if len(entries) < 2 || len(entries) > 6 {
		t.Fatalf("%d crash reports in 12 s, want 2..6 with backoff", len(entries))
	}
	first := entries[0]
	if first.Field("FLEXIQ_EXIT_STATUS") != "3" || first.Field("FLEXIQ_RESULT") != "exit-code" {
		t.Errorf("crash report lacks the exit status or result: %v", first)
	}
	msgs := ""
	for _, en := range entries {
		msgs += en.Field("MESSAGE") + "\n"
	}
	for _, want := range []string{"in 1s", "in 2s", "in 4s"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("no %q backoff in the crash reports:\n%s", want, msgs)
		}
	}
	started := e.JournalText("-u", daemonUnit, "FLEXIQ_POOL=crashy", "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b02")
	if !strings.Contains(started, "flexiq-crashy@1.service (replacing crashed worker)") {
		t.Errorf("the crashed worker was not replaced in slot 1:\n%s", started)
	}
}

// After a SIGKILL of the daemon, systemd restarts it and the new daemon
// adopts the running workers: the same units and invocations, no duplicates.
func TestRestartedDaemonAdoptsWorkers(t *testing.T) {
	parallel(t)
	e := setup(t)
	e.Configure(e.poolConfig("adopt", "min_workers = 3\n"))
	e.StartDaemon()
	e.waitWorkers("adopt", 3, 10*time.Second)
	before := map[string]string{}
	for _, u := range e.Workers("adopt", "active") {
		before[u] = e.UnitProp(u, "InvocationID")
	}
	oldPID := e.DaemonPID()
	if err := syscall.Kill(hostPID(t, e, oldPID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.Eventually(15*time.Second, "a restarted daemon", func() (bool, string) {
		pid := e.DaemonPID()
		return pid != 0 && pid != oldPID && e.UnitProp(daemonUnit, "ActiveState") == "active", fmt.Sprintf("pid %d", pid)
	})
	time.Sleep(3 * time.Second) // a few ticks of the new daemon
	after := e.Workers("adopt", "active", "activating")
	if len(after) != 3 {
		t.Fatalf("after the restart: %v, want the same 3 workers", after)
	}
	for _, u := range after {
		if inv := e.UnitProp(u, "InvocationID"); inv != before[u] {
			t.Errorf("%s: invocation %s, was %s: the worker was restarted", u, inv, before[u])
		}
	}
	if out := e.JournalText("-u", daemonUnit); !strings.Contains(out, "adopted 3 running workers") {
		t.Errorf("the new daemon did not report adopting the workers:\n%s", out)
	}
}

// A watchdog that is not fed (here: the daemon frozen with SIGSTOP, as a hung
// D-Bus call would freeze its loop) gets the daemon restarted, and the
// workers survive and are adopted.
func TestWatchdogRestartsAWedgedDaemon(t *testing.T) {
	e := setup(t)
	e.Configure(e.poolConfig("wd", "min_workers = 2\n"))
	e.StartDaemon()
	e.waitWorkers("wd", 2, 10*time.Second)
	inv := e.UnitProp("flexiq-wd@1.service", "InvocationID")
	oldPID := e.DaemonPID()
	if err := syscall.Kill(hostPID(t, e, oldPID), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.Eventually(20*time.Second, "a daemon restarted by the watchdog", func() (bool, string) {
		pid := e.DaemonPID()
		return pid != 0 && pid != oldPID && e.UnitProp(daemonUnit, "ActiveState") == "active", fmt.Sprintf("pid %d", pid)
	})
	if out := e.JournalText("-u", daemonUnit); !strings.Contains(out, "Watchdog timeout") {
		t.Errorf("systemd did not log a watchdog timeout:\n%s", out)
	}
	if got := e.UnitProp("flexiq-wd@1.service", "InvocationID"); got != inv {
		t.Errorf("worker 1 was restarted (invocation %s, was %s)", got, inv)
	}
	e.waitWorkers("wd", 2, 5*time.Second)
}

// With the database gone, or locked, the pool holds: missing data never
// scales anything down, even with no scale-down window.
func TestMissingOrLockedDatabaseHolds(t *testing.T) {
	parallel(t)
	e := setup(t)
	e.Configure(e.poolConfig("hold", `
min_workers = 1
max_workers = 4
target_queue_depth_per_worker = 5
threads_per_worker = 1
target_utilisation = 1.0
scale_down_window_sec = 0
`))
	e.StartDaemon()
	// depth 3; the jobs outlast the checks below, and are short enough for
	// the cleanup's drain not to wait long.
	e.Enqueue(15, 14*time.Second)
	e.waitWorkers("hold", 3, 15*time.Second)

	// Lock: an exclusive transaction held from the host.
	tx, err := e.DB.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("PRAGMA locking_mode=EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE jobs SET status = status"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	if n := len(e.Workers("hold", "active")); n != 3 {
		e.Errorf("with the database locked: %d workers, want a hold at 3", n)
	}
	tx.Rollback()

	// Gone: the file is removed; the workers keep running, the pool holds.
	e.Sh("rm -f " + e.DBPath + " " + e.DBPath + "-wal " + e.DBPath + "-shm")
	time.Sleep(4 * time.Second)
	if n := len(e.Workers("hold", "active")); n != 3 {
		e.Errorf("with the database removed: %d workers, want a hold at 3", n)
	}
	entries := e.Entries("FLEXIQ_POOL=hold", "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b05")
	if len(entries) == 0 {
		t.Fatal("no source error in the journal")
	}
	// Logged at the first failure, then at most once a minute.
	if len(entries) > 3 {
		t.Errorf("%d source error entries in 8 s: the log is not throttled", len(entries))
	}
}

// A reload with a bad configuration keeps the daemon running on the old one;
// a good reload adds and removes pools.
func TestReload(t *testing.T) {
	parallel(t)
	e := setup(t)
	good := e.poolConfig("reload_a", "min_workers = 1\n")
	e.Configure(good)
	e.StartDaemon()
	e.waitWorkers("reload_a", 1, 10*time.Second)

	e.Configure(good + "\n[pools.reload_a.limits]\nmax_worker = 3\n")
	if _, _, code := e.run("systemctl", "reload", daemonUnit); code == 0 {
		t.Errorf("systemctl reload of an invalid file succeeded")
	}
	if st := e.UnitProp(daemonUnit, "ActiveState"); st != "active" {
		t.Fatalf("after a bad reload the daemon is %s", st)
	}
	if out := e.JournalText("-u", daemonUnit); !strings.Contains(out, "reload rejected") || !strings.Contains(out, "max_worker") {
		t.Errorf("the rejected reload does not name the bad key:\n%s", out)
	}
	e.waitWorkers("reload_a", 1, 5*time.Second)

	e.Configure(e.poolConfig("reload_b", "min_workers = 2\n"))
	e.Sh("systemctl reload " + daemonUnit)
	e.waitWorkers("reload_b", 2, 10*time.Second)
	e.waitWorkers("reload_a", 0, 10*time.Second)
	if st := e.UnitProp(daemonUnit, "StatusText"); !strings.HasPrefix(st, "reload_b 2/10 workers") {
		t.Errorf("StatusText after reload = %q", st)
	}
}

// Admins customise every worker of a pool with a template drop-in, and the
// pool's budget with a slice drop-in.
func TestDropInsApply(t *testing.T) {
	parallel(t)
	e := setup(t)
	e.Write("/etc/systemd/system/flexiq-dropin@.service.d/50-admin.conf", "[Service]\nEnvironment=ADMIN_SETTING=from-drop-in\nNice=5\n")
	e.Write("/etc/systemd/system/flexiq-dropin.slice.d/50-budget.conf", "[Slice]\nCPUQuota=150%\nTasksMax=77\n")
	e.Sh("systemctl daemon-reload")
	e.Configure(e.poolConfig("dropin", "min_workers = 1\n"))
	e.StartDaemon()
	e.waitWorkers("dropin", 1, 10*time.Second)
	unit := "flexiq-dropin@1.service"
	pid := e.UnitProp(unit, "MainPID")
	environ := e.Sh("tr '\\0' '\\n' < /proc/" + pid + "/environ")
	for _, want := range []string{"ADMIN_SETTING=from-drop-in", "FLEXIQ_SCALED_POOL=dropin", "FLEXIQ_SCALED_SLOT=1"} {
		if !strings.Contains(environ, want) {
			t.Errorf("worker environment lacks %s:\n%s", want, environ)
		}
	}
	if nice := e.UnitProp(unit, "Nice"); nice != "5" {
		t.Errorf("Nice = %s, want the drop-in's 5", nice)
	}
	if q := e.UnitProp("flexiq-dropin.slice", "CPUQuotaPerSecUSec"); q != "1.500000s" {
		t.Errorf("slice CPUQuotaPerSecUSec = %s, want the drop-in's 150%%", q)
	}
	if tm := e.UnitProp("flexiq-dropin.slice", "TasksMax"); tm != "77" {
		t.Errorf("slice TasksMax = %s, want the drop-in's 77", tm)
	}
	if cg := e.UnitProp(unit, "ControlGroup"); cg != "/flexiq.slice/flexiq-dropin.slice/"+unit {
		t.Errorf("ControlGroup = %s", cg)
	}
	if user := e.UnitProp(unit, "User"); user != "flexiq" {
		t.Errorf("worker User = %q, want the default flexiq", user)
	}
}

// A configuration problem stops the daemon from starting, with every problem
// named by file and key.
func TestBadConfigFailsStart(t *testing.T) {
	parallel(t)
	e := setup(t)
	e.Configure(e.poolConfig("bad", "max_workers = 0\nmin_worker = 1\n"))
	if _, err := e.SB.Exec(e.Ctx(), "systemctl", "start", daemonUnit); err == nil {
		t.Fatal("the daemon started on an invalid configuration")
	}
	out := e.JournalText("-u", daemonUnit)
	for _, want := range []string{"/etc/flexiq-scaled/config.toml", "pools.bad.max_workers", "pools.bad.min_worker"} {
		if !strings.Contains(out, want) {
			t.Errorf("the start failure does not name %q:\n%s", want, out)
		}
	}
	e.Sh("systemctl reset-failed " + daemonUnit)
}

// hostPID maps a PID inside the sandbox to the host's view, where the test
// can signal it.
func hostPID(t testing.TB, e *env, inner int) int {
	t.Helper()
	pid, ok := e.SB.HostPIDs()[inner]
	if !ok {
		t.Fatalf("no host PID for sandbox PID %d", inner)
	}
	return pid
}

func sandboxNS(e *env) string {
	ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", e.SB.PID))
	return ns
}

// The daemon keeps managing its pool across `systemctl daemon-reexec` and a
// restart of the system bus: it reconnects, re-reads every unit, and neither
// loses nor duplicates a worker.
func TestSurvivesReexecAndBusRestart(t *testing.T) {
	parallel(t)
	e := setup(t)
	e.Configure(e.poolConfig("reexec", `
min_workers = 1
max_workers = 4
target_queue_depth_per_worker = 5
threads_per_worker = 1
target_utilisation = 1.0
scale_down_window_sec = 0
`))
	e.StartDaemon()
	e.waitWorkers("reexec", 1, 10*time.Second)
	pid := e.DaemonPID()

	e.Sh("systemctl daemon-reexec")
	e.Sh("systemctl restart dbus.service")
	// Demand after the disruption must still be acted on.
	e.Enqueue(15, 5*time.Second)
	e.waitWorkers("reexec", 3, 20*time.Second)
	if got := e.DaemonPID(); got != pid {
		t.Errorf("the daemon was restarted (pid %d, was %d); it should have reconnected", got, pid)
	}
	if n := len(e.Workers("reexec")); n != 3 {
		e.Errorf("%d worker units loaded, want exactly 3", n)
	}
}

// `systemctl restart` (what a package upgrade does) is not a stop: the
// workers keep running, untouched, and the new daemon adopts them.
func TestRestartKeepsWorkers(t *testing.T) {
	parallel(t)
	e := setup(t)
	e.Configure(e.poolConfig("keep", "min_workers = 2\n"))
	e.StartDaemon()
	e.waitWorkers("keep", 2, 10*time.Second)
	type identity struct{ pid, inv string }
	before := map[string]identity{}
	for _, u := range e.Workers("keep", "active") {
		before[u] = identity{e.UnitProp(u, "MainPID"), e.UnitProp(u, "InvocationID")}
	}
	oldPID := e.DaemonPID()
	e.Sh("systemctl restart " + daemonUnit)
	if e.DaemonPID() == oldPID {
		t.Fatal("the daemon was not restarted")
	}
	for u, id := range before {
		if got := (identity{e.UnitProp(u, "MainPID"), e.UnitProp(u, "InvocationID")}); got != id {
			t.Errorf("%s changed across the restart: %v, was %v", u, got, id)
		}
	}
	out := e.JournalText("-u", daemonUnit)
	if !strings.Contains(out, "is restarting: leaving 2 workers running") || !strings.Contains(out, "adopted 2 running workers") {
		t.Errorf("the journal does not show the hand-over:\n%s", out)
	}
}

// With a CPU target, workers that burn their CPU budget ask for more
// workers even with an empty queue.
func TestCPUSignalScalesUp(t *testing.T) {
	e := setup(t)
	e.Configure(e.poolConfig("cpu", `
exec = ["/usr/local/bin/flexiq-testworker", "--busy"]
min_workers = 1
max_workers = 3
target_cpu_utilisation = 0.5
cpu_per_worker = 0.5
threads_per_worker = 1
target_utilisation = 1.0
scale_down_window_sec = 60
`))
	e.StartDaemon()
	e.waitWorkers("cpu", 1, 10*time.Second)
	// One long job on a busy worker: the queue asks for one worker, the CPU
	// (a full core against 0.5 per worker at a 0.5 target) for more.
	if err := flexiqdb.Enqueue(e.DB, flexiqdb.Job{DurationMs: 20000}); err != nil {
		t.Fatal(err)
	}
	cpuDriven := regexp.MustCompile(`scale-up: depth=[01] busy=1 cpu=[2-9]`)
	e.Eventually(20*time.Second, "a scale-up driven by the CPU signal", func() (bool, string) {
		out := e.JournalText("-u", daemonUnit, "FLEXIQ_POOL=cpu", "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01")
		return cpuDriven.MatchString(out), out
	})
	if n := len(e.Workers("cpu", "active", "activating")); n < 2 {
		t.Errorf("%d workers after a CPU-driven scale-up", n)
	}
}

// `run --user` drives a user's service manager: the workers are that user's
// transient units, and run as that user.
func TestUserManager(t *testing.T) {
	parallel(t)
	e := setup(t)
	e.Sh("systemctl start user@0.service")
	t.Cleanup(func() { e.SB.Exec(e.Ctx(), "systemctl", "stop", "user@0.service") })
	e.Write("/etc/flexiq-scaled/user.toml", e.poolConfig("mine", "min_workers = 2\n"))
	user := "XDG_RUNTIME_DIR=/run/user/0 "
	e.Sh(user + "systemd-run --user --unit flexiq-scaled-user.service -p Type=notify -p NotifyAccess=main /usr/bin/flexiq-scaled run --user --config /etc/flexiq-scaled/user.toml")
	e.Eventually(15*time.Second, "2 workers under the user manager", func() (bool, string) {
		out := e.Sh(user + "systemctl --user list-units --plain --no-legend 'flexiq-mine@*.service'")
		return strings.Count(out, " active running ") == 2, out
	})
	if sys := e.Workers("mine"); len(sys) > 0 {
		t.Errorf("workers leaked into the system manager: %v", sys)
	}
	cg := e.Sh(user + "systemctl --user show -P ControlGroup flexiq-mine@1.service")
	if !strings.Contains(cg, "/user@0.service/flexiq.slice/flexiq-mine.slice/flexiq-mine@1.service") {
		t.Errorf("worker cgroup %q is not under the user manager's flexiq.slice", cg)
	}
	// reload --user finds the daemon's socket in $XDG_RUNTIME_DIR.
	e.Write("/etc/flexiq-scaled/user.toml", e.poolConfig("mine", "min_workers = 3\n"))
	if out, errs, code := e.run("sh", "-c", user+"flexiq-scaled reload --user"); code != 0 || !strings.Contains(out, "pool mine: min_workers") {
		t.Errorf("reload --user: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	e.Eventually(15*time.Second, "3 workers after the reload", func() (bool, string) {
		out := e.Sh(user + "systemctl --user list-units --plain --no-legend 'flexiq-mine@*.service'")
		return strings.Count(out, " active running ") == 3, out
	})
	e.Sh(user + "systemctl --user stop flexiq-scaled-user.service")
	if out := e.Sh(user + "systemctl --user list-units --plain --no-legend 'flexiq-mine@*.service'"); strings.TrimSpace(out) != "" {
		t.Errorf("workers left after stopping the user daemon:\n%s", out)
	}
}

// A slow source in one pool stalls no other pool: each pool ticks on its
// own, and a source read is bounded by its pool's tick interval.
func TestSlowSourceStallsOnlyItsPool(t *testing.T) {
	e := setup(t)
	// A query that takes seconds on every tick: the pool holds.
	slow := fmt.Sprintf(`
[pools.slow]
exec = ["/usr/local/bin/flexiq-testworker", "--queues", "not-this-one"]
environment = { FLEXIQ_DB_PATH = %q }
poll_interval_sec = 1
min_workers = 1
[pools.slow.source]
type = "sqlite-query"
path = %q
query = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50000000) SELECT count(*) * 0, 0 FROM c"
`, e.DBPath, e.DBPath)
	e.Configure(slow + e.poolConfig("quick", `
min_workers = 1
max_workers = 4
target_queue_depth_per_worker = 5
threads_per_worker = 1
target_utilisation = 1.0
`))
	e.StartDaemon()
	e.waitWorkers("quick", 1, 10*time.Second)
	e.Enqueue(15, 10*time.Second)
	// Depth 3 at the next tick of its own, whatever the slow pool is doing.
	e.waitWorkers("quick", 3, 6*time.Second)
	e.Eventually(10*time.Second, "the slow pool's source timing out", func() (bool, string) {
		return strings.Contains(e.JournalText("-u", daemonUnit), "pool=slow source unavailable"), ""
	})
	if n := len(e.Workers("slow", "active")); n != 1 {
		e.Errorf("the slow pool has %d workers, want a hold at 1", n)
	}
}
