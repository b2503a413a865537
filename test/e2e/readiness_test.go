package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Issue 9's readiness and two-phase drain against the real systemd.
const (
	scaleUpDeferredID = "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b22"
	conditionSkipID   = "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b23"
	workerQuietID     = "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b24"
	workerDrainingID  = "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b09"
	workerStoppedID   = "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b03"
	workerCrashedID   = "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b04"
)

// A required unit that becomes active late defers the pool's starts, with
// one event, and releases them once it is active; the daemon never starts
// it itself. Requires= (not BindsTo=) leaves running workers alone when the
// required unit crashes.
func TestRequiresDefersThenReleasesScaleUps(t *testing.T) {
	parallel(t)
	e := setup(t)
	const dep = "flexiq-e2e-dep.service"
	e.Write("/etc/systemd/system/"+dep, "[Service]\nExecStart=/bin/sleep infinity\n")
	t.Cleanup(func() {
		// The daemon first: with it gone, stopping the dependency stops
		// no worker that it would try to replace.
		e.SB.Exec(context.Background(), "sh", "-c", "systemctl stop "+daemonUnit+"; systemctl stop "+dep+"; rm -f /etc/systemd/system/"+dep+"; systemctl daemon-reload; systemctl reset-failed "+dep)
	})
	e.Sh("systemctl daemon-reload")
	e.Configure(e.poolConfig("deps", fmt.Sprintf(`
min_workers = 1
max_workers = 3
target_queue_depth_per_worker = 10
threads_per_worker = 1
target_utilisation = 1.0
scale_down_window_sec = 60
requires = [%q]
`, dep)))
	e.StartDaemon()

	time.Sleep(3 * time.Second)
	if ws := e.Workers("deps", "active", "activating"); len(ws) != 0 {
		e.Fatalf("workers %v started while %s is inactive", ws, dep)
	}
	if st := e.UnitProp(dep, "ActiveState"); st != "inactive" {
		e.Fatalf("%s is %s: the daemon pulled it in", dep, st)
	}
	deferred := e.Entries("FLEXIQ_POOL=deps", scaleUpDeferredID)
	if len(deferred) != 1 || !strings.Contains(deferred[0].Field("FLEXIQ_WAITING_FOR"), dep+" (inactive)") {
		e.Fatalf("want one scale-up-deferred event waiting for %s, got %d: %v", dep, len(deferred), deferred)
	}

	released := time.Now()
	e.Sh("systemctl start " + dep)
	e.waitWorkers("deps", 1, 5*time.Second)
	t.Logf("first worker %.1fs after %s became active", time.Since(released).Seconds(), dep)
	unit := e.Workers("deps", "active")[0]
	for _, prop := range []string{"Requires", "After"} {
		if v := e.UnitProp(unit, prop); !strings.Contains(v, dep) {
			t.Errorf("%s %s=%q, want it to name %s", unit, prop, v, dep)
		}
	}
	if v := e.UnitProp(unit, "BindsTo"); v != "" {
		t.Errorf("%s BindsTo=%q, want none", unit, v)
	}

	// The required unit crashes: with Requires= the running worker stays.
	e.Sh("systemctl kill -s KILL " + dep)
	e.Eventually(5*time.Second, dep+" down", func() (bool, string) {
		st := e.UnitProp(dep, "ActiveState")
		return st == "failed" || st == "inactive", st
	})
	// Demand for 3 while it is down: deferred, a new episode.
	e.Enqueue(30, 4*time.Second)
	time.Sleep(3 * time.Second)
	if ws := e.Workers("deps", "active"); len(ws) != 1 || ws[0] != unit {
		e.Fatalf("active %v after %s crashed with demand for 3, want only %s (kept, and the scale-up deferred)", ws, dep, unit)
	}
	if n := len(e.Entries("FLEXIQ_POOL=deps", scaleUpDeferredID)); n < 3 {
		e.Fatalf("%d scale-up-deferred events, want the first episode's two and the second's start", n)
	}
	e.Sh("systemctl reset-failed " + dep + "; systemctl start " + dep)
	e.waitWorkers("deps", 3, 10*time.Second)
	var releases int
	for _, en := range e.Entries("FLEXIQ_POOL=deps", scaleUpDeferredID) {
		if strings.Contains(en.Field("MESSAGE"), "releasing") {
			releases++
		}
	}
	if releases != 2 {
		t.Errorf("%d release events, want 2 (one per episode)", releases)
	}
}

// A start_condition that fails (a shared volume not yet populated) skips
// the worker: no crash, no backoff, one event, a retry every poll interval;
// once the file appears, the worker starts.
func TestStartConditionFailsThenPasses(t *testing.T) {
	e := setup(t)
	ready := dbInside + "/" + strings.ToLower(t.Name()) + ".ready"
	e.Sh("rm -f " + ready)
	e.Configure(e.poolConfig("cond", fmt.Sprintf(`
min_workers = 1
max_workers = 2
start_condition = "test -e %s"
`, ready)))
	e.StartDaemon()

	time.Sleep(4 * time.Second)
	// A unit activating in its "condition" sub-state is a start being
	// tried (each retry's ExecCondition runs for a few tens of ms), not a
	// worker running.
	us, err := e.ListUnits("flexiq-cond@*.service")
	if err != nil {
		t.Fatal(err)
	}
	var ws []string
	for _, u := range us {
		if u.Active == "active" || u.Active == "activating" && u.Sub != "condition" {
			ws = append(ws, u.Name)
		}
	}
	if len(ws) != 0 {
		e.Fatalf("workers %v active while the start condition fails; ExecCondition=%q\n%s", ws,
			e.UnitProp(ws[0], "ExecCondition"), e.JournalText("-u", ws[0]))
	}
	skips := e.Entries("FLEXIQ_POOL=cond", conditionSkipID)
	if len(skips) != 1 {
		e.Fatalf("%d condition-skip events, want 1 for the episode", len(skips))
	}
	if crashes := e.Entries("FLEXIQ_POOL=cond", workerCrashedID); len(crashes) != 0 {
		e.Fatalf("a skipped start was reported as a crash or failed start: %v", crashes[0].Field("MESSAGE"))
	}
	// systemd says how many times the condition was asked: once per poll
	// interval (1 s), never a tight loop.
	unitLog := e.JournalText("-u", "flexiq-cond@1.service")
	attempts := strings.Count(unitLog, "exec-condition")
	t.Logf("start condition checked %d times in 4 s (systemd's \"Skipped due to 'exec-condition'\" lines):\n%s", attempts, unitLog)
	if attempts < 2 {
		t.Errorf("start condition checked %d times in 4 s, want a retry every poll interval (1 s)", attempts)
	}
	if attempts > 12 {
		t.Errorf("start condition checked %d times in 4 s: a hot loop", attempts)
	}

	e.Sh("touch " + ready)
	t0 := time.Now()
	e.waitWorkers("cond", 1, 5*time.Second)
	t.Logf("worker active %.1fs after the file appeared", time.Since(t0).Seconds())
	e.Eventually(5*time.Second, "a condition-passes event", func() (bool, string) {
		for _, en := range e.Entries("FLEXIQ_POOL=cond", conditionSkipID) {
			if strings.Contains(en.Field("MESSAGE"), "start_condition passes") {
				return true, ""
			}
		}
		return false, "none"
	})
	if v := e.UnitProp("flexiq-cond@1.service", "ExecCondition"); !strings.Contains(v, ready) {
		t.Errorf("ExecCondition=%q, want it to test %s", v, ready)
	}
}

// Two-phase drain: at scale-down the worker gets the quiet signal first,
// stops counting at once, and gets the drain signal quiet_period_sec later.
func TestTwoPhaseDrain(t *testing.T) {
	e := setup(t)
	const quiet = 4 * time.Second
	e.Configure(e.poolConfig("quiet", fmt.Sprintf(`
min_workers = 1
max_workers = 2
target_queue_depth_per_worker = 10
threads_per_worker = 1
target_utilisation = 1.0
scale_down_window_sec = 1
quiet_signal = "TSTP"
quiet_period_sec = %g
drain_timeout_sec = 10
`, quiet.Seconds())))
	e.StartDaemon()
	e.waitWorkers("quiet", 1, 10*time.Second)
	e.Enqueue(20, 200*time.Millisecond)
	e.waitWorkers("quiet", 2, 10*time.Second)

	// The queue empties; the pool goes back to 1 in two phases.
	var unit string
	e.Eventually(30*time.Second, "a quiet phase", func() (bool, string) {
		for _, en := range e.Entries("FLEXIQ_POOL=quiet", workerDrainingID) {
			if strings.Contains(en.Field("FLEXIQ_REASON"), "quiet phase") {
				unit = en.Field("FLEXIQ_UNIT")
				return true, ""
			}
		}
		return false, "no draining event with a quiet phase"
	})
	// It stops counting at once: the daemon's status says 1 worker while
	// the quiet one still runs.
	if st := e.UnitProp(unit, "ActiveState"); st != "active" {
		t.Errorf("%s is %s during its quiet phase, want active", unit, st)
	}
	e.Eventually(3*time.Second, "the status counting 1 worker", func() (bool, string) {
		st := e.UnitProp(daemonUnit, "StatusText")
		return strings.HasPrefix(st, "quiet 1/2 workers"), st
	})
	e.Eventually(quiet+15*time.Second, unit+" gone", func() (bool, string) {
		ws := e.Workers("quiet")
		return !slices.Contains(ws, unit), fmt.Sprintf("units %v", ws)
	})
	times := e.SignalTimes(unit)
	tstp, term := times["SIGTSTP"], times["SIGTERM"]
	if tstp.IsZero() || term.IsZero() {
		e.Fatalf("%s got signals %v, want SIGTSTP then SIGTERM\n%s", unit, times, e.JournalText("-u", unit))
	}
	gap := term.Sub(tstp)
	t.Logf("SIGTSTP -> SIGTERM: %.2fs (quiet_period_sec = %g)", gap.Seconds(), quiet.Seconds())
	if gap < quiet-time.Second || gap > quiet+time.Second {
		t.Errorf("SIGTERM came %.2fs after SIGTSTP, want %g s ± 1 s", gap.Seconds(), quiet.Seconds())
	}
	if n := len(e.Entries("FLEXIQ_UNIT="+unit, workerQuietID)); n != 1 {
		t.Errorf("%d quiet-over events for %s, want 1", n, unit)
	}
	e.Eventually(3*time.Second, "the stopped event", func() (bool, string) {
		stopped := e.Entries("FLEXIQ_UNIT="+unit, workerStoppedID)
		return len(stopped) == 1 && stopped[0].Field("FLEXIQ_RESULT") == "success", fmt.Sprintf("stopped events %v", stopped)
	})
	if ws := e.Workers("quiet", "active"); len(ws) != 1 {
		t.Errorf("active after the drain: %v, want 1", ws)
	}
}
