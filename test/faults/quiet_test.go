package faults

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var signalLineRE = regexp.MustCompile(`signal (SIG[A-Z0-9]+) at (\d+)`)

// signalTimes reads, from a worker unit's journal, when its worker got each
// signal (the test worker logs them with its own clock).
func (e *env) signalTimes(unit string) map[string]time.Time {
	out := map[string]time.Time{}
	for _, m := range signalLineRE.FindAllStringSubmatch(e.journalText("-u", unit, "-o", "cat"), -1) {
		ms, _ := strconv.ParseInt(m[2], 10, 64)
		if _, seen := out[m[1]]; !seen {
			out[m[1]] = time.UnixMilli(ms)
		}
	}
	return out
}

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
	e.configure(e.demandPool("q", fmt.Sprintf(`exec = ["/usr/local/bin/flexiq-testworker", "--poll", "50ms"]
min_workers = 1
max_workers = 2
scale_down_window_sec = 1
quiet_signal = "TSTP"
quiet_period_sec = %g
drain_timeout_sec = 20
`, quiet.Seconds())))
	e.setDemand(2, 0)
	e.startDaemon()
	e.waitLive("q", 2, 20*time.Second)

	e.setDemand(0, 0)
	var unit string
	e.eventually(20*time.Second, "a quiet phase", func() (bool, string) {
		for _, en := range e.entries("FLEXIQ_POOL=q", "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b09") {
			if strings.Contains(en.Field("FLEXIQ_REASON"), "quiet phase") {
				unit = en.Field("FLEXIQ_UNIT")
				return true, ""
			}
		}
		return false, "no draining event with a quiet phase"
	})
	var tstp time.Time
	e.eventually(5*time.Second, unit+" to log its SIGTSTP", func() (bool, string) {
		tstp = e.signalTimes(unit)["SIGTSTP"]
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
	old := e.daemonPID()
	e.killMain(daemonUnit, syscall.SIGKILL)
	restarted := e.waitRestarted(old, 15*time.Second)
	t.Logf("daemon restarted %.2fs into the quiet phase", restarted.Sub(tstp).Seconds())
	if restarted.Sub(tstp) > quiet-2*time.Second {
		t.Fatalf("the restart took until %.1fs into an %s quiet phase: too late to judge it", restarted.Sub(tstp).Seconds(), quiet)
	}

	// Until the deadline, the quiet worker runs and gets no other signal;
	// the other one is kept as it was.
	for time.Now().Before(tstp.Add(quiet - 700*time.Millisecond)) {
		if st := e.unitProp(unit, "ActiveState"); st != "active" {
			e.fatalf("%s is %s %.1fs into its %s quiet phase: stopped early", unit, st, time.Since(tstp).Seconds(), quiet)
		}
		// Judged by when the worker logged each signal, not by when this
		// loop read the journal: on a loaded machine a read that began
		// before the deadline can end after the (punctual) stop.
		for sig, at := range e.signalTimes(unit) {
			if sig != "SIGTSTP" && at.Before(tstp.Add(quiet-700*time.Millisecond)) {
				e.fatalf("%s got %s %.1fs into its %s quiet phase", unit, sig, at.Sub(tstp).Seconds(), quiet)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.eventually(quiet+10*time.Second, unit+" gone", func() (bool, string) {
		st := e.unitProp(unit, "ActiveState")
		return st == "inactive" || st == "", st
	})
	times := e.signalTimes(unit)
	term := times["SIGTERM"]
	if term.IsZero() {
		e.fatalf("%s got %v, no SIGTERM", unit, times)
	}
	gap := term.Sub(tstp)
	if gap < quiet-time.Second || gap > quiet+time.Second {
		e.errorf("SIGTERM came %.2fs after SIGTSTP across the restart, want %s ± 1 s", gap.Seconds(), quiet)
	}
	e.eventually(5*time.Second, "the stopped event", func() (bool, string) {
		stopped := e.entries("FLEXIQ_UNIT="+unit, "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b03")
		return len(stopped) == 1 && stopped[0].Field("FLEXIQ_RESULT") == "success", fmt.Sprintf("stopped events %v", stopped)
	})
	now := e.identities("q")
	if len(now) != 1 || now[kept] != before[kept] {
		e.errorf("live workers %v after the drain, want only %s as it was (%v)", now, kept, before[kept])
	}
	if crashes := e.entries("FLEXIQ_POOL=q", "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b04"); len(crashes) != 0 {
		e.errorf("crash events: %s", crashes[0].Field("MESSAGE"))
	}
	e.figure("quiet_period", quiet, "killed_at", restarted.Sub(tstp), "stop_after", gap)
}
