package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Defect 1 of issue 7: a restart of the daemon must change no scaling
// decision. A pool held at 8 by its scale-down window in a lull keeps 8
// through a restart, for the rest of its window.
func TestRestartKeepsTheStabilisationWindow(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(r *rig)
	}{
		{"with the state file", func(r *rig) {}},
		{"without a state file: the adopted count seeds the window", func(r *rig) {
			os.Remove(r.pool.state.path())
		}},
		{"with a corrupt state file", func(r *rig) {
			os.WriteFile(r.pool.state.path(), []byte("{not json"), 0o644)
		}},
		{"with a state file of an unknown version", func(r *rig) {
			os.WriteFile(r.pool.state.path(), []byte(`{"version": 99, "pool": "work"}`), 0o644)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, testPool("work"))
			r.sd.stopNow = true
			r.start(r.pool)
			r.src.set(80, 0, nil) // depth 8
			r.tick(time.Second)
			if n := r.sd.count("active"); n != 8 {
				t.Fatalf("%d active after the burst, want 8", n)
			}
			r.src.set(0, 0, nil) // the lull
			r.tick(10 * time.Second)
			if n := r.sd.count("active"); n != 8 {
				t.Fatalf("%d active in the lull, want 8 (held by the window)", n)
			}
			tc.prepare(r)

			// The restart: a new pool on the same systemd and state dir.
			r.clock.advance(5 * time.Second)
			r.pool = r.newPool()
			r.start(r.pool)
			for i := range 25 { // 250 s, inside the 300 s window
				r.tick(10 * time.Second)
				if n := r.sd.count("active"); n != 8 {
					t.Fatalf("tick %d after the restart: %d active, want 8\n%s", i, n, r.log)
				}
			}
			r.tick(60 * time.Second) // past the window
			if n := r.sd.count("active"); n != 1 {
				t.Errorf("after the window: %d active, want 1", n)
			}
		})
	}
}

func TestStateFileRules(t *testing.T) {
	now := monoTime(10 * time.Hour)
	good := `{"version":1,"pool":"work","saved_at_mono_ns":%d,"target":4}`
	at := func(d time.Duration) string {
		return strings.Replace(good, "%d", strconv.FormatInt(int64(monoSince(now)-d), 10), 1)
	}
	cases := []struct {
		name, content, why string
	}{
		{"fresh", at(time.Minute), ""},
		{"older than the longest window", at(time.Hour), "older than the longest window"},
		{"from the future (another boot)", at(-time.Hour), "in the future"},
		{"another pool's", strings.Replace(at(0), `"work"`, `"mail"`, 1), "written for pool"},
		{"garbage", "\x00\x01", "corrupt"},
		{"negative target", strings.Replace(at(0), `"target":4`, `"target":-1`, 1), "corrupt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, why := parseState([]byte(tc.content), "work", now, 5*time.Minute)
			if tc.why == "" {
				if st == nil || st.Target != 4 {
					t.Errorf("state %+v (%s), want target 4", st, why)
				}
				return
			}
			if st != nil || !strings.Contains(why, tc.why) {
				t.Errorf("state %+v, why %q; want nil and %q", st, why, tc.why)
			}
		})
	}
}

// Defect 3: a unit that is still stopping counts as draining: its slot stays
// taken, its jobs are not the live workers', and it is no crash.
func TestDeactivatingUnitCountsAsDraining(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.cfg.MinWorkers = 3
	r.start(r.pool)
	r.src.set(0, 3, nil) // each worker busy with one job
	r.tick(time.Second)
	// An admin stops worker 3, which drains slowly.
	r.sd.set("flexiq-work@3.service", "deactivating", "success")
	r.tick(time.Second)
	if got := r.lines("stopped without being asked"); len(got) > 0 {
		t.Errorf("an admin's stop reported as a crash: %v", got)
	}
	if got := r.lines("draining flexiq-work@3.service", "from outside"); len(got) != 1 {
		t.Errorf("want one draining entry for the admin's stop, got %v\n%s", got, r.log)
	}
	// Its job is still running: not an overload of the two live workers,
	// and min_workers (3) is back with a new slot, not slot 3.
	if n := r.sd.count("active"); n != 3 {
		t.Errorf("%d active, want 3 (two left + one replacement for min_workers)", n)
	}
	if _, ok := r.sd.units["flexiq-work@4.service"]; !ok {
		t.Errorf("the replacement did not take slot 4; units: %v", r.sd.unitsIn("active"))
	}
	if len(r.pool.workers.Slots.Backoff) != 0 {
		t.Errorf("backoff armed: %v", r.pool.workers.Slots.Backoff)
	}
	st := r.pool.Status()
	if st.Draining != 1 {
		t.Errorf("status draining %d, want 1", st.Draining)
	}
	// When systemd reports it gone, the slot is free again.
	r.sd.finish("flexiq-work@3.service", "success")
	r.tick(time.Second)
	if r.pool.Status().Draining != 0 {
		t.Errorf("still draining after the unit is gone")
	}
}

// Defect 3, second half: UnitExists on start re-lists and takes another
// slot; it arms no backoff and is no crash.
func TestUnitExistsTakesAnotherSlot(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.cfg.MinWorkers = 2
	// Slot 1 is taken by a unit stopping behind the pool's back: the first
	// listing did not show it (it was started between the list and the start).
	r.start(r.pool)
	r.sd.mu.Lock()
	r.sd.units["flexiq-work@3.service"] = &units.Worker{Unit: "flexiq-work@3.service", Pool: "work", Slot: 3, ActiveState: "deactivating"}
	r.sd.mu.Unlock()
	// Pretend the pool has not listed since: start two more directly.
	r.pool.do(func() { r.pool.workers.StartWorkers(context.Background(), r.clock.now, 2, "test", nil) })
	if n := r.sd.count("active"); n != 4 {
		t.Errorf("%d active, want 4 (slots 1, 2, then 4 and 5 around the stopping 3)", n)
	}
	if len(r.pool.workers.Slots.Backoff) != 0 {
		t.Errorf("backoff armed for UnitExists: %v", r.pool.workers.Slots.Backoff)
	}
	if got := r.lines("failed to start"); len(got) > 0 {
		t.Errorf("UnitExists logged as a failed start: %v", got)
	}
	if got := r.lines("still taken"); len(got) != 1 {
		t.Errorf("want one 'still taken' line, got %v", got)
	}
}

// Defect 4: bounds apply during a source outage.
func TestBoundsApplyDuringOutage(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.sd.stopNow = true
	r.cfg.MinWorkers, r.cfg.MaxWorkers = 4, 20
	r.start(r.pool)
	r.src.set(0, 0, errors.New("database does not exist"))
	r.tick(time.Second)
	raised := *r.cfg
	raised.MinWorkers = 6
	r.pool.Update(&raised)
	r.tick(time.Second)
	if n := r.sd.count("active"); n != 6 {
		t.Errorf("min_workers raised to 6 during the outage: %d active", n)
	}
	lowered := raised
	lowered.MinWorkers, lowered.MaxWorkers = 1, 2
	r.pool.Update(&lowered)
	r.tick(time.Second)
	if n := r.sd.count("active"); n != 2 {
		t.Errorf("max_workers lowered to 2 during the outage: %d active", n)
	}
	// Within the bounds, still no scale-down.
	within := lowered
	within.MaxWorkers = 10
	r.pool.Update(&within)
	r.tick(time.Hour)
	if n := r.sd.count("active"); n != 2 {
		t.Errorf("missing data scaled the pool within its bounds: %d active", n)
	}
	if st := r.pool.Status().String(); !strings.Contains(st, "? pending (database does not exist)") {
		t.Errorf("status during the hold: %q", st)
	}
}

// Defect 13: a crash loop logs its decision once, not every tick; each
// failed start carries the unit's Result and exit status.
func TestCrashLoopLogsOnce(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.cfg.MinWorkers = 0
	r.start(r.pool)
	r.sd.failStart = &units.StartError{JobResult: "failed", Result: "exit-code", ExitStatus: 203}
	r.src.set(20, 0, nil) // depth 2
	for range 60 {
		r.tick(time.Second)
	}
	if got := r.lines(`FLEXIQ_ACTION="scale-up"`); len(got) != 1 {
		t.Errorf("%d scale-up decisions logged in 60 ticks, want 1:\n%s", len(got), strings.Join(got, "\n"))
	}
	fails := r.lines("failed to start")
	if len(fails) == 0 || len(fails) > 14 {
		t.Fatalf("%d failed starts in 60 s, want a few with backoff", len(fails))
	}
	for _, l := range fails {
		if !strings.Contains(l, `FLEXIQ_RESULT="exit-code"`) || !strings.Contains(l, `FLEXIQ_EXIT_STATUS="203"`) || !strings.Contains(l, "203/EXEC") {
			t.Errorf("failed start without its result: %s", l)
		}
	}
}

// Defect 13: the stop event tells the unit's Result; a SIGKILL at the drain
// timeout is a warning.
func TestStopReportsTheUnitResult(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.cfg.MinWorkers, r.cfg.ScaleDownWindow = 0, 0
	r.start(r.pool)
	r.src.set(20, 0, nil)
	r.tick(time.Second)
	r.src.set(0, 0, nil)
	r.tick(time.Second)
	if n := r.sd.count("deactivating"); n != 2 {
		t.Fatalf("%d deactivating, want 2", n)
	}
	r.sd.finish("flexiq-work@1.service", "success")
	r.sd.finish("flexiq-work@2.service", "timeout")
	r.tick(time.Second)
	ok := r.lines("flexiq-work@1.service stopped", `FLEXIQ_RESULT="success"`, "<6>")
	killed := r.lines("flexiq-work@2.service stopped", `FLEXIQ_RESULT="timeout"`, "<4>", "SIGKILLed")
	if len(ok) != 1 || len(killed) != 1 {
		t.Errorf("stop events: clean %v, killed %v\n%s", ok, killed, r.log)
	}
	if left := r.sd.count("failed"); left != 0 {
		t.Errorf("%d failed units left, want them reset", left)
	}
}

// Defect 6: a reload that shortens the interval takes effect at once.
func TestUpdateWakesTheLoop(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.cfg.PollInterval = time.Hour
	r.start(r.pool)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.pool.Run(ctx)
	before := r.pool.LastProgress()
	short := *r.cfg
	short.PollInterval = 20 * time.Millisecond
	r.pool.Update(&short)
	deadline := time.Now().Add(10 * time.Second)
	for r.pool.LastProgress() == before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if r.pool.LastProgress() == before {
		t.Fatal("no tick after shortening the interval from 1 h")
	}
}

// Defect 8: a changed definition is rolled out one worker at a time, the new
// one active before the old one drains, so capacity never dips.
func TestRolloutReplacesOneAtATime(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.cfg.MinWorkers = 4
	r.start(r.pool)
	r.src.set(0, 0, nil)
	r.tick(time.Second)
	old := r.pool.workers.Revision()
	changed := *r.cfg
	changed.Environment = map[string]string{"RELEASE": "2"}
	r.pool.Update(&changed)
	r.cfg = &changed
	for i := range 10 {
		r.tick(time.Second)
		if n := r.sd.count("active"); n < 4 {
			t.Fatalf("tick %d: capacity %d below the target 4", i, n)
		}
		// Old workers finish their drain between ticks.
		for _, u := range r.sd.unitsIn("deactivating") {
			r.sd.finish(u, "success")
		}
	}
	newRev := r.pool.workers.Revision()
	if newRev == old {
		t.Fatal("the revision did not change with the environment")
	}
	for name, s := range r.sd.specs {
		if _, live := r.sd.units[name]; live && s.Revision != newRev {
			t.Errorf("%s still runs revision %s", name, s.Revision)
		}
	}
	if got := r.lines("rollout done"); len(got) != 1 {
		t.Errorf("want one 'rollout done', got %v\n%s", got, r.log)
	}
	if got := r.lines("rollout:", "replaced by", "left"); len(got) != 4 {
		t.Errorf("want 4 replacements, got %d", len(got))
	}
	// roll with no config change replaces them again.
	r.pool.Roll("deploy")
	for range 6 {
		r.tick(time.Second)
		for _, u := range r.sd.unitsIn("deactivating") {
			r.sd.finish(u, "success")
		}
	}
	if got := r.lines("rollout done"); len(got) != 2 {
		t.Errorf("roll: want a second 'rollout done', got %d", len(got))
	}
	// The nonce survives a restart: no rollout after it.
	r.pool = r.newPool()
	r.start(r.pool)
	r.tick(time.Second)
	if got := r.lines("begins"); len(got) != 2 {
		t.Errorf("a restart began a rollout: %d 'begins' lines", len(got))
	}
}

// Defect 7: Drain stops workers that appear while it waits.
func TestDrainStopsLateWorkers(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.cfg.MinWorkers = 2
	r.sd.stopNow = true
	r.start(r.pool)
	// A start that was pending when the drain began lands meanwhile.
	go func() {
		time.Sleep(50 * time.Millisecond)
		r.sd.mu.Lock()
		r.sd.units["flexiq-work@7.service"] = &units.Worker{Unit: "flexiq-work@7.service", Pool: "work", Slot: 7, ActiveState: "activating"}
		r.sd.mu.Unlock()
	}()
	time.Sleep(60 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.pool.Drain(ctx, "daemon stopping")
	if n := len(r.sd.units); n != 0 {
		t.Errorf("%d units left after Drain", n)
	}
}

// The controller's windows and backoffs follow its own (monotonic) clock
// only: a jump of the wall clock changes nothing.
func TestWallClockJumpsChangeNothing(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.sd.stopNow = true
	r.start(r.pool)
	r.src.set(80, 0, nil)
	r.tick(time.Second)
	r.src.set(0, 0, nil)
	// The monotonic clock moves 10 s while (in a real host) the wall clock
	// might jump a day either way: the pool holds, as the window says.
	r.tick(10 * time.Second)
	if n := r.sd.count("active"); n != 8 {
		t.Errorf("%d active, want 8", n)
	}
	if got := monoSince(MonotonicClock()); got <= 0 {
		t.Errorf("MonotonicClock() = %v since the epoch, want CLOCK_MONOTONIC > 0", got)
	}
	a, b := MonotonicClock(), MonotonicClock()
	if b.Before(a) {
		t.Error("MonotonicClock went backwards")
	}
}

func TestStateFileIsWrittenAtomically(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.start(r.pool)
	r.tick(time.Second)
	entries, _ := os.ReadDir(r.dir)
	if len(entries) != 1 || entries[0].Name() != "pool-work.json" {
		t.Errorf("state dir holds %v, want only pool-work.json", entries)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "pool-work.json")); err != nil {
		t.Error(err)
	}
}

// An admin's stop is a scale-down by hand: no replacement is started at
// once only to be drained by the same tick's decision.
func TestAdminStopIsNotReplacedAtOnce(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.cfg.MinWorkers, r.cfg.ScaleDownWindow = 1, 0
	r.start(r.pool)
	r.src.set(1, 3, nil) // one pending; three running, one a worker
	r.tick(time.Second)
	if n := r.sd.count("active"); n != 3 {
		t.Fatalf("%d active, want 3", n)
	}
	starts := len(r.sd.starts)
	r.sd.set("flexiq-work@3.service", "deactivating", "success")
	r.tick(time.Second)
	r.tick(time.Second)
	if len(r.sd.starts) != starts || len(r.sd.stops) != 0 {
		t.Errorf("after the admin's stop: starts %v, stops %v; want none", r.sd.starts[starts:], r.sd.stops)
	}
	if n := r.sd.count("active"); n != 2 {
		t.Errorf("%d active, want 2", n)
	}
}

// A restart after a gap: the window's last high recommendation is older than
// the gap, but the ticks the daemon missed would have kept the window open.
// The adopted count holds the pool for a window from the restart.
func TestRestartAfterAGapHoldsTheAdoptedCount(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.sd.stopNow = true
	r.cfg.ScaleDownWindow = 3 * time.Second
	r.start(r.pool)
	r.src.set(50, 0, nil)
	r.tick(time.Second)
	r.tick(time.Second) // raw 5, twice
	// Killed; back 3 s later, when the demand has just fallen.
	r.clock.advance(3 * time.Second)
	r.pool = r.newPool()
	r.start(r.pool)
	r.src.set(10, 0, nil)
	r.tick(time.Second)
	if n := r.sd.count("active"); n != 5 {
		t.Fatalf("%d active 1 s after the restart, want 5 (the adopted count holds for the window)\n%s", n, r.log)
	}
	r.tick(3 * time.Second)
	if n := r.sd.count("active"); n != 1 {
		t.Errorf("%d active after the window, want 1", n)
	}
}
