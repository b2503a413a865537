package faults

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// A worker that takes a while to stop, as a real one finishing its job
// does: a kill of the daemon can land while workers are deactivating.
// (No "$": systemd would expand it.)
const slowStopExec = `exec = ["/bin/sh", "-c", "trap 'sleep 1.5; exit 0' TERM; while :; do sleep 0.2; done"]`

// killPoints is how many random points the daemon is SIGKILLed at, over
// both SIGKILL tests (half scale-ups, half scale-downs). FAULTS_KILL_POINTS
// changes it.
func killPoints() int {
	if n, err := strconv.Atoi(os.Getenv("FAULTS_KILL_POINTS")); err == nil && n > 0 {
		return n
	}
	return 24
}

// The daemon SIGKILLed at random points of scale-ups and scale-downs:
// systemd restarts it (Restart=on-failure) and the new daemon must carry on
// as if nothing happened. The points are split over two tests that run side
// by side, each in its own sandbox.
func TestDaemonSIGKILLMidScaleA(t *testing.T) { daemonKillCycles(t, "daemon-sigkill-a") }
func TestDaemonSIGKILLMidScaleB(t *testing.T) { daemonKillCycles(t, "daemon-sigkill-b") }

func daemonKillCycles(t *testing.T, fault string) {
	e := setup(t, fault)
	rng := seeded(t)
	const (
		pool   = "k"
		window = 3 * time.Second
		tick   = time.Second
		maxW   = 12
		// What "within two ticks" allows for D-Bus round trips, unit starts
		// and a tick's own duration on a busy machine (CI runs the whole
		// suite side by side on two cores).
		slack = 3 * time.Second
	)
	e.Configure(e.demandPool(pool, slowStopExec+fmt.Sprintf(`
min_workers = 1
max_workers = %d
scale_down_window_sec = %g
`, maxW, window.Seconds())))
	e.setDemand(2, 0)
	e.StartDaemon()
	e.waitLive(pool, 2, 15*time.Second)
	mon := e.watch(pool, 100*time.Millisecond)

	cycles := (killPoints() + 3) / 4 // two tests, a scale-up and a scale-down point per cycle
	var (
		points, early, killed, started, overshoot, dropped int
		worstUp, worstDown                                 time.Duration
	)
	// The first violation of each kind is reported with the daemon's
	// journal, the others in a line each: every cycle runs, so that the
	// figures count the violations over all the points.
	violation := func(count *int, format string, args ...any) {
		t.Helper()
		if *count == 0 {
			e.Errorf(format, args...)
		} else {
			t.Errorf(format, args...)
		}
		*count++
	}
	var slowUp, slowDown int
	kill := func(delay time.Duration) time.Time {
		time.Sleep(delay)
		old := e.DaemonPID()
		e.killMain(daemonUnit, syscall.SIGKILL)
		points++
		return e.waitRestarted(old, 20*time.Second)
	}
	for c := 0; c < cycles; c++ {
		// Scale-up, killed 0..2.5 s after the demand rose: before the tick
		// saw it, while its units start, or just after.
		lo := len(live(e.units(pool)))
		hi := min(maxW, lo+3+rng.IntN(4))
		before := e.identities(pool)
		t0 := time.Now()
		e.setDemand(hi, 0)
		delay := jitter(rng, 0, 2500*time.Millisecond)
		ready := kill(delay)
		// From the new daemon's readiness to the pool's convergence.
		conv := e.waitLiveOrErr(pool, hi, 2*tick+slack+15*time.Second)
		worstUp = max(worstUp, conv)
		if conv > 2*tick+slack {
			violation(&slowUp, "cycle %d up %d -> %d, killed %s in: converged %s after the restart, want within two ticks (+%s)", c, lo, hi, delay, conv, slack)
		}
		after := e.identities(pool)
		for u, id := range before {
			if got, ok := after[u]; !ok || got != id {
				violation(&killed, "cycle %d up: %s was %v before the kill, now %v (present %v): a worker was killed or replaced", c, u, id, got, ok)
			}
		}
		for _, s := range mon.between(t0, time.Now()) {
			if s.live() > hi {
				violation(&overshoot, "cycle %d up: %d live workers at %s, the demand asks for %d: %v", c, s.live(), s.at.Sub(t0), hi, names(s.units))
				break
			}
			if s.live() < lo {
				violation(&dropped, "cycle %d up: %d live workers at %s, fewer than the %d before the scale-up: %v", c, s.live(), s.at.Sub(t0), lo, names(s.units))
				break
			}
		}

		// Scale-down, killed 0..window+2 s after the demand fell: before
		// the window is over (the new daemon must not shorten it), or while
		// the drains run.
		hi = len(live(e.units(pool)))
		lo = 1 + rng.IntN(3)
		before = e.identities(pool)
		t0 = time.Now()
		e.setDemand(lo, 0)
		delay = jitter(rng, 0, window+2*time.Second)
		ready = kill(delay)
		e.waitLiveOrErr(pool, lo, 2*tick+slack+2*window+15*time.Second)
		// The window ends a window after the demand fell, or after the
		// restart, whichever is later: a starting daemon counts the
		// workers it adopts as a recommendation made then (the ticks it
		// missed would have kept the window open for them), so a kill
		// 2.5 s into a 3 s window, or just after it but before the tick
		// that acted on it, holds the pool for a new window. (Counting
		// from the restart alone had left 1-2 s of the 3 s slack: 3.7 s
		// measured against 5 s.)
		due := t0.Add(window)
		if r := ready.Add(window); r.After(due) {
			due = r
		}
		conv = max(time.Since(due)-100*time.Millisecond, 0)
		for _, s := range mon.between(t0, time.Now()) {
			if s.live() == lo {
				conv = max(s.at.Sub(due), 0)
				break
			}
		}
		worstDown = max(worstDown, conv)
		if conv > 2*tick+slack {
			violation(&slowDown, "cycle %d down %d -> %d, killed %s in: converged %s after the window and the restart, want within two ticks (+%s)", c, hi, lo, delay, conv, slack)
		}
		// The window runs from the last recommendation of the high
		// count, which the tick before the demand fell made: up to a tick
		// before t0. So a scale-down is early before window - tick (less
		// the sampling's slack), not before the window itself (a CI run
		// saw a correct one at 2.47 s of a 3 s window).
		for _, s := range mon.between(t0, time.Now()) {
			if s.live() < hi && s.at.Before(t0.Add(window-tick-200*time.Millisecond)) {
				violation(&early, "cycle %d down %d -> %d, killed %s in: %d live workers %s after the demand fell, inside the %s window: the restart shortened it: %v",
					c, hi, lo, delay, s.live(), s.at.Sub(t0).Round(time.Millisecond), window, names(s.units))
				break
			}
			if s.live() < lo || s.live() > hi {
				violation(&overshoot, "cycle %d down %d -> %d: %d live workers: %v", c, hi, lo, s.live(), names(s.units))
				break
			}
		}
		after = e.identities(pool)
		for u, id := range after {
			if was, ok := before[u]; !ok || was != id {
				violation(&started, "cycle %d down: %s is %v, was %v (present %v): a scale-down started or replaced a worker", c, u, id, was, ok)
			}
		}
	}
	mon.Stop()
	crashes := len(e.Entries("FLEXIQ_POOL="+pool, "MESSAGE_ID="+msgWorkerCrashed))
	if crashes > 0 {
		e.Errorf("%d crash events: no worker crashed; a start collided with a unit that was still there", crashes)
	}
	failed := e.Sh("systemctl list-units --failed --plain --no-legend 'flexiq-*' || true")
	if strings.TrimSpace(failed) != "" {
		t.Errorf("failed units: %s", failed)
	}
	e.figure("points", points, "early_scale_down", early, "workers_killed", killed, "workers_started_on_scale_down", started,
		"outside_bounds", overshoot+dropped, "slow_converge_up", slowUp, "slow_converge_down", slowDown, "crash_events", crashes,
		"worst_converge_up", worstUp, "worst_converge_down", worstDown, "samples", mon.count())
}

// waitLiveOrErr waits for n live workers like waitLive, but a timeout is an
// error, not the end of the test, and it returns the time taken either way.
func (e *env) waitLiveOrErr(pool string, n int, within time.Duration) time.Duration {
	e.T.Helper()
	t0 := time.Now()
	ok, state := sandbox.Poll(within, 100*time.Millisecond, func() (bool, string) {
		us := e.units(pool)
		return len(live(us)) == n, fmt.Sprint(names(us))
	})
	if !ok {
		e.Errorf("after %s, still no %d live workers in pool %s (%s)", within, n, pool, state)
	}
	return time.Since(t0)
}

// `systemctl restart` in a lull (what a package upgrade does): the new
// daemon must keep the pool's size for the rest of its scale-down window,
// not drop straight to the raw recommendation.
func TestRestartDuringLull(t *testing.T) {
	e := setup(t, "restart-in-lull")
	const window = 30 * time.Second
	e.Configure(e.demandPool("lull", fmt.Sprintf("min_workers = 1\nmax_workers = 10\nscale_down_window_sec = %g\n", window.Seconds())))
	e.setDemand(8, 0)
	e.StartDaemon()
	e.waitLive("lull", 8, 20*time.Second)
	before := e.identities("lull")

	// The lull begins; a few ticks later, the upgrade restarts the daemon.
	t0 := time.Now()
	e.setDemand(0, 0)
	time.Sleep(3 * time.Second)
	e.Sh("systemctl restart " + daemonUnit)
	restarted := time.Now()
	mon := e.watch("lull", 200*time.Millisecond)

	// Until the window (counted from the start of the lull) is nearly over,
	// the pool keeps all 8.
	low := 8
	var lowAt time.Duration
	for time.Now().Before(t0.Add(window - 2*time.Second)) {
		if n := len(live(e.units("lull"))); n < low {
			low, lowAt = n, time.Since(restarted)
		}
		if low < 8 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if low < 8 {
		e.Errorf("%d workers %s after the restart, %s into a %s lull: the restart forgot the scale-down window",
			low, lowAt.Round(100*time.Millisecond), (time.Since(t0) - time.Since(restarted) + lowAt).Round(time.Second), window)
	} else {
		for u, id := range before {
			if got := e.identities("lull")[u]; got != id {
				t.Errorf("%s changed across the restart: %v, was %v", u, got, id)
			}
		}
		// And once the window is over, the lull scales it down: the
		// window the new daemon keeps ends a window after its start (it
		// counts the 8 it adopts as a recommendation made then), measured
		// at 30.6-31.0 s after the restart; two 1 s ticks and 5 s for a
		// busy machine beyond that.
		e.waitLiveOrErr("lull", 1, time.Until(restarted.Add(window))+2*time.Second+5*time.Second)
	}
	mon.Stop()
	e.figure("window", window, "held_until", held(mon, 8, restarted), "workers_min_in_window", low)
}

// held is how long after from the pool kept at least n live workers.
func held(m *monitor, n int, from time.Time) time.Duration {
	for _, s := range m.between(from, time.Now()) {
		if s.live() < n {
			return s.at.Sub(from)
		}
	}
	return time.Since(from)
}

// `systemctl daemon-reexec` and a restart of the system bus, each in the
// middle of a scale-up: the daemon reconnects, and no worker is lost or
// duplicated.
func TestReexecAndBusRestartDuringScaleUp(t *testing.T) {
	e := setup(t, "reexec-and-dbus-restart")
	e.Configure(e.demandPool("rx", "min_workers = 1\nmax_workers = 14\nscale_down_window_sec = 60\n"))
	e.setDemand(2, 0)
	e.StartDaemon()
	e.waitLive("rx", 2, 15*time.Second)
	pid := e.DaemonPID()
	mon := e.watch("rx", 100*time.Millisecond)
	lost, extra := 0, 0
	for _, step := range []struct {
		what, cmd string
		to        int
	}{
		{"daemon-reexec", "systemctl daemon-reexec", 7},
		{"dbus restart", "systemctl restart dbus.service", 12},
	} {
		before := e.identities("rx")
		t0 := time.Now()
		e.setDemand(step.to, 0)
		time.Sleep(time.Duration(rand.IntN(1000)) * time.Millisecond)
		e.Sh(step.cmd)
		took := e.waitLiveOrErr("rx", step.to, 25*time.Second)
		after := e.identities("rx")
		for u, id := range before {
			if after[u] != id {
				lost++
				t.Errorf("%s: %s was %v, now %v", step.what, u, id, after[u])
			}
		}
		for _, s := range mon.between(t0, time.Now()) {
			if s.live() > step.to || len(s.units) > step.to {
				extra++
				e.Errorf("%s: %d units (%d live) for %d wanted: %v", step.what, len(s.units), s.live(), step.to, names(s.units))
				break
			}
		}
		e.figure("step", strings.ReplaceAll(step.what, " ", "-"), "converged_after", took)
	}
	mon.Stop()
	if got := e.DaemonPID(); got != pid {
		t.Errorf("the daemon was restarted (pid %d, was %d); it should have reconnected", got, pid)
	}
	e.figure("workers_lost", lost, "duplicates", extra, "daemon_restarted", e.DaemonPID() != pid)
}

// `systemctl stop flexiq-scaled` while a scale-up is in flight: every
// worker is stopped, including those whose start was still pending or
// that started during the shutdown.
func TestStopDuringScaleUpLeavesNoWorker(t *testing.T) {
	e := setup(t, "stop-during-scale-up")
	rng := seeded(t)
	e.Configure(e.demandPool("st", "min_workers = 1\nmax_workers = 40\n"))
	leftover := 0
	const rounds = 4
	for i := 0; i < rounds; i++ {
		e.setDemand(1, 0)
		e.StartDaemon()
		e.waitLive("st", 1, 15*time.Second)
		e.setDemand(40, 0)
		// Stop as soon as the first new unit appears, or a little later.
		e.Eventually(10*time.Second, "the scale-up to begin", func() (bool, string) {
			return len(e.units("st")) > 1, ""
		})
		time.Sleep(jitter(rng, 0, 300*time.Millisecond))
		e.Sh("systemctl stop " + daemonUnit)
		if left := running(e.units("st")); len(left) > 0 {
			leftover += len(left)
			// A start that lands a moment later is as bad: look again.
			e.Errorf("round %d: units left after the daemon's stop: %v", i, names(left))
			e.Sh("systemctl stop 'flexiq-st@*.service'; systemctl reset-failed")
		} else {
			time.Sleep(time.Second)
			if late := running(e.units("st")); len(late) > 0 {
				leftover += len(late)
				e.Errorf("round %d: units started after the daemon's stop: %v", i, names(late))
				e.Sh("systemctl stop 'flexiq-st@*.service'")
			}
		}
	}
	e.figure("rounds", rounds, "workers_left_running", leftover)
}

// A reload that shortens poll_interval_sec from 300 to 1 s, with a short
// watchdog: the new interval applies at once, so the watchdog keeps being
// fed and the next tick comes within about a second.
func TestReloadShortensPollInterval(t *testing.T) {
	e := setup(t, "reload-poll-300-to-1")
	cfg := func(poll int) string {
		return e.demandPool("pi", fmt.Sprintf("poll_interval_sec = %d\nmin_workers = 1\nmax_workers = 5\n", poll))
	}
	e.Configure(cfg(300))
	e.setDemand(1, 0)
	e.StartDaemon()
	e.waitLive("pi", 1, 15*time.Second)
	pid := e.DaemonPID()
	time.Sleep(2 * time.Second)
	e.setDemand(3, 0)
	e.Configure(cfg(1))
	t0 := time.Now()
	e.Reload()
	ok, state := sandbox.Poll(time.Second+4*time.Second, 100*time.Millisecond, func() (bool, string) {
		us := e.units("pi")
		return len(live(us)) == 3, fmt.Sprint(names(us))
	})
	tickAfter := time.Since(t0)
	if !ok {
		e.Errorf("no tick within %s of the reload to 1 s (%s)", tickAfter.Round(100*time.Millisecond), state)
	}
	// Outlive the watchdog twice over: the daemon must still be the same.
	time.Sleep(2*watchdogSec*time.Second - time.Since(t0))
	newPID := e.DaemonPID()
	if newPID != pid {
		e.Errorf("the daemon was restarted (pid %d, was %d) after the reload", newPID, pid)
	}
	wd := strings.Contains(e.JournalText("-u", daemonUnit), "Watchdog timeout")
	if wd {
		t.Errorf("systemd's watchdog fired after the reload")
	}
	e.figure("first_tick_after_reload", tickAfter, "watchdog_fired", wd, "daemon_restarted", newPID != pid)
}
