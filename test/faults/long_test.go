package faults

// The suite's two longest tests (two minutes and more of waiting each), in
// a file that sorts first, so that they start first and the shorter tests
// fill the time beside them.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// A pool whose worker cannot start at all (`exec = ["/bin/false"]`): after
// the first minute its slots start at most 8 times a minute each, the
// daemon stays healthy (active, watchdog fed, never restarted), and another
// pool keeps scaling meanwhile.
func TestCrashLoop(t *testing.T) {
	e := setup(t, "crash-loop")
	e.Configure(e.demandPool("loop", "exec = [\"/bin/false\"]\nmin_workers = 2\nmax_workers = 2\n") +
		e.demandPool("other", "min_workers = 1\nmax_workers = 6\nscale_down_window_sec = 0\n"))
	e.setDemand(1, 0)
	t0 := time.Now()
	e.StartDaemon()
	pid := e.DaemonPID()

	// The other pool scales up and back down during the second minute.
	var otherUp, otherDown time.Duration
	time.Sleep(time.Until(t0.Add(70 * time.Second)))
	e.setDemand(5, 0)
	otherUp = e.waitLiveOrErr("other", 5, 10*time.Second)
	time.Sleep(time.Until(t0.Add(95 * time.Second)))
	e.setDemand(2, 0)
	otherDown = e.waitLiveOrErr("other", 2, 10*time.Second)
	time.Sleep(time.Until(t0.Add(121 * time.Second)))

	from, to := t0.Add(60*time.Second), t0.Add(120*time.Second)
	worst, total := 0, 0
	for slot := 1; slot <= 2; slot++ {
		u := fmt.Sprintf("flexiq-loop@%d.service", slot)
		first := starts(e.Entries("_PID=1", "UNIT="+u, fmt.Sprintf("--until=@%d", from.Unix())))
		second := starts(e.Entries("_PID=1", "UNIT="+u, fmt.Sprintf("--since=@%d", from.Unix()), fmt.Sprintf("--until=@%d", to.Unix())))
		worst = max(worst, second)
		total += first + second
		e.figure("slot", slot, "starts_first_minute", first, "starts_second_minute", second)
		if second > 8 {
			t.Errorf("%s started %d times in the second minute, want at most 8", u, second)
		}
	}
	if total == 0 {
		t.Fatalf("no start of the crash-looping pool in the journal at all:\n%s", e.JournalText("-u", daemonUnit, "-n", "40"))
	}
	state := e.UnitProp(daemonUnit, "ActiveState")
	restarts := e.UnitProp(daemonUnit, "NRestarts")
	journal := e.JournalText("-u", daemonUnit)
	wd := strings.Contains(journal, "Watchdog timeout") || strings.Contains(journal, "not feeding the watchdog")
	if state != "active" || restarts != "0" || e.DaemonPID() != pid || wd {
		e.Errorf("the daemon is not healthy after two minutes of a crash loop: %s, NRestarts=%s, pid %d (was %d), watchdog trouble %v",
			state, restarts, e.DaemonPID(), pid, wd)
	}
	decisions := len(e.Entries("FLEXIQ_POOL=loop", "MESSAGE_ID="+msgDecision, fmt.Sprintf("--since=@%d", from.Unix()), fmt.Sprintf("--until=@%d", to.Unix())))
	e.figure("max_starts_per_slot_per_minute", worst, "daemon", state, "nrestarts", restarts, "watchdog_trouble", wd,
		"other_pool_up_1_to_5", otherUp, "other_pool_down_5_to_2", otherDown, "loop_decisions_second_minute", decisions)
}

// starts counts a unit's starts in systemd's journal entries about it: each
// start has an invocation of its own.
func starts(entries []sandbox.JournalEntry) int {
	seen := map[string]bool{}
	for _, en := range entries {
		if id := en.Field("INVOCATION_ID"); id != "" {
			seen[id] = true
		}
	}
	return len(seen)
}

// drain_timeout_sec = 0 means no limit: a worker that ignores SIGTERM is
// still there after 120 s (past systemd's default of 90 s), and its slot
// stays busy the whole time: a new worker goes to another slot.
func TestDrainTimeoutZeroNeverKills(t *testing.T) {
	e := setup(t, "drain-timeout-0")
	e.Configure(e.demandPool("forever", `exec = ["/usr/local/bin/flexiq-testworker", "--ignore-sigterm"]
min_workers = 1
max_workers = 3
scale_down_window_sec = 0
drain_timeout_sec = 0
`))
	e.setDemand(2, 0)
	e.StartDaemon()
	e.waitLive("forever", 2, 15*time.Second)
	e.waitStarted("forever", 2)
	ids := e.identities("forever")
	e.setDemand(1, 0)
	var stopping string
	e.Eventually(10*time.Second, "a worker draining", func() (bool, string) {
		for _, u := range e.units("forever") {
			if u.Active == "deactivating" {
				stopping = u.Name
			}
		}
		return stopping != "", ""
	})
	t0 := time.Now()
	pid := ids[stopping].pid
	timeout := e.UnitProp(stopping, "TimeoutStopUSec")
	mon := e.watch("forever", time.Second)

	// Past the daemon's own wait (drain time + 60 s) and before systemd's
	// 90 s: more demand. The new worker must not take the stopping slot.
	time.Sleep(time.Until(t0.Add(65 * time.Second)))
	e.setDemand(2, 0)
	var newcomer string
	ok, state := sandbox.Poll(10*time.Second, 200*time.Millisecond, func() (bool, string) {
		for _, u := range live(e.units("forever")) {
			if _, old := ids[u.Name]; !old {
				newcomer = u.Name
			}
		}
		return newcomer != "", fmt.Sprint(names(e.units("forever")))
	})
	if !ok {
		e.Errorf("no new worker 10 s after the demand rose again, with %s still stopping: %s", stopping, state)
	}
	time.Sleep(time.Until(t0.Add(120 * time.Second)))
	mon.Stop()
	gone := time.Duration(0)
	for _, s := range mon.between(t0, time.Now()) {
		present := false
		for _, u := range s.units {
			present = present || (u.Name == stopping && u.Active == "deactivating")
		}
		if !present {
			gone = s.at.Sub(t0)
			break
		}
	}
	alive := e.UnitProp(stopping, "MainPID") == pid && pid != "0"
	if gone > 0 || !alive {
		e.Errorf("%s (drain_timeout_sec = 0) stopped being a draining worker %s into its drain (TimeoutStopUSec=%s); want it still there at 120 s",
			stopping, gone.Round(time.Second), timeout)
	}
	crashes := len(e.Entries("FLEXIQ_POOL=forever", "MESSAGE_ID="+msgWorkerCrashed))
	if crashes > 0 || newcomer == stopping {
		e.Errorf("the stopping slot was reused: new worker %s, %d crash events", newcomer, crashes)
	}
	e.figure("timeout_stop_usec", timeout, "still_draining_at_120s", gone == 0 && alive, "gone_after", gone,
		"new_worker", newcomer, "crash_events", crashes)
}
