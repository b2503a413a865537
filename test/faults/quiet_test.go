package faults

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The daemon is SIGKILLed in the middle of a worker's quiet phase (two-phase
// drain). systemd restarts it; the restarted daemon must take the worker as
// draining, not adopt it as live, and stop it at the same deadline: not
// early (cutting the quiet phase, and the jobs finishing in it, short), not
// late, and no worker may be lost or killed.
func TestDaemonSIGKILLDuringQuietPhase(t *testing.T) {
	e := setup(t, "daemon-sigkill-quiet")
	// Long enough that a restart slowed by a loaded machine (6 s seen with
	// helpers compiling on both cores) still leaves most of the phase to
	// judge.
	const quiet = 15 * time.Second
	e.Configure(e.demandPool("q", fmt.Sprintf(`exec = ["/usr/local/bin/flexiq-testworker", "--poll", "50ms"]
min_workers = 1
max_workers = 2
scale_down_window_sec = 1
quiet_signal = "TSTP"
quiet_period_sec = %g
drain_timeout_sec = 20
`, quiet.Seconds())))
	e.setDemand(2, 0)
	e.StartDaemon()
	e.waitLive("q", 2, 20*time.Second)

	e.setDemand(0, 0)
	var unit string
	e.Eventually(20*time.Second, "a quiet phase", func() (bool, string) {
		for _, en := range e.Entries("FLEXIQ_POOL=q", "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b09") {
			if strings.Contains(en.Field("FLEXIQ_REASON"), "quiet phase") {
				unit = en.Field("FLEXIQ_UNIT")
				return true, ""
			}
		}
		return false, "no draining event with a quiet phase"
	})
	var tstp time.Time
	e.Eventually(5*time.Second, unit+" to log its SIGTSTP", func() (bool, string) {
		tstp = e.SignalTimes(unit)["SIGTSTP"]
		return !tstp.IsZero(), "not yet"
	})
	var kept string
	for u := range e.identities("q") {
		if u != unit {
			kept = u
		}
	}
	before := e.identities("q")

	// Two seconds into the quiet phase, the daemon dies.
	time.Sleep(2*time.Second - time.Since(tstp))
	old := e.DaemonPID()
	e.killMain(daemonUnit, syscall.SIGKILL)
	restarted := e.waitRestarted(old, 15*time.Second)
	t.Logf("daemon restarted %.2fs into the quiet phase", restarted.Sub(tstp).Seconds())
	if restarted.Sub(tstp) > quiet-2*time.Second {
		t.Fatalf("the restart took until %.1fs into an %s quiet phase: too late to judge it", restarted.Sub(tstp).Seconds(), quiet)
	}

	// Until the deadline, the quiet worker runs and gets no other signal;
	// the other one is kept as it was.
	for time.Now().Before(tstp.Add(quiet - 700*time.Millisecond)) {
		if st := e.UnitProp(unit, "ActiveState"); st != "active" {
			e.Fatalf("%s is %s %.1fs into its %s quiet phase: stopped early", unit, st, time.Since(tstp).Seconds(), quiet)
		}
		// Judged by when the worker logged each signal, not by when this
		// loop read the journal: on a loaded machine a read that began
		// before the deadline can end after the (punctual) stop.
		for sig, at := range e.SignalTimes(unit) {
			if sig != "SIGTSTP" && at.Before(tstp.Add(quiet-700*time.Millisecond)) {
				e.Fatalf("%s got %s %.1fs into its %s quiet phase", unit, sig, at.Sub(tstp).Seconds(), quiet)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.Eventually(quiet+10*time.Second, unit+" gone", func() (bool, string) {
		st := e.UnitProp(unit, "ActiveState")
		return st == "inactive" || st == "", st
	})
	times := e.SignalTimes(unit)
	term := times["SIGTERM"]
	if term.IsZero() {
		e.Fatalf("%s got %v, no SIGTERM", unit, times)
	}
	gap := term.Sub(tstp)
	if gap < quiet-time.Second || gap > quiet+time.Second {
		e.Errorf("SIGTERM came %.2fs after SIGTSTP across the restart, want %s ± 1 s", gap.Seconds(), quiet)
	}
	e.Eventually(5*time.Second, "the stopped event", func() (bool, string) {
		stopped := e.Entries("FLEXIQ_UNIT="+unit, "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b03")
		return len(stopped) == 1 && stopped[0].Field("FLEXIQ_RESULT") == "success", fmt.Sprintf("stopped events %v", stopped)
	})
	now := e.identities("q")
	if len(now) != 1 || now[kept] != before[kept] {
		e.Errorf("live workers %v after the drain, want only %s as it was (%v)", now, kept, before[kept])
	}
	if crashes := e.Entries("FLEXIQ_POOL=q", "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b04"); len(crashes) != 0 {
		e.Errorf("crash events: %s", crashes[0].Field("MESSAGE"))
	}
	e.figure("quiet_period", quiet, "killed_at", restarted.Sub(tstp), "stop_after", gap)
}
