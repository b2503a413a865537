package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/capacity"
	"github.com/flexiq/flexiq-scaled/internal/config"
)

func (f *fakeSystemd) UnitStates(ctx context.Context, names []string) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for _, n := range names {
		st, ok := f.deps[n]
		if !ok {
			st = "inactive" // not loaded, as systemd reports it
		}
		out[n] = st
	}
	return out, nil
}

func (f *fakeSystemd) KillMain(ctx context.Context, unit string, signal int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.units[unit]; !ok {
		return fmt.Errorf("unit %s not loaded", unit)
	}
	if f.killErr != nil {
		return f.killErr
	}
	f.kills = append(f.kills, unit)
	return nil
}

func (f *fakeSystemd) setDep(unit, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.deps == nil {
		f.deps = map[string]string{}
	}
	f.deps[unit] = state
}

func (f *fakeSystemd) startCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.starts)
}

// Scale-ups wait for the required units, with one event per episode, and
// start once they are active.
func TestRequiresDefersScaleUps(t *testing.T) {
	cfg := testPool("work")
	cfg.Requires = []string{"postgresql.service", "n8n.service"}
	r := newRig(t, cfg)
	r.sd.setDep("postgresql.service", "activating")
	r.sd.setDep("n8n.service", "active")
	r.start(r.pool)
	if n := r.sd.count("active"); n != 0 {
		t.Fatalf("%d workers started while postgresql.service is activating, want 0", n)
	}
	r.src.set(30, 0, nil) // demand for 3
	for range 5 {
		r.tick(time.Second)
	}
	if n := r.sd.startCount(); n != 0 {
		t.Fatalf("%d starts while deferred, want 0", n)
	}
	if got := r.lines("scale-up deferred"); len(got) != 1 {
		t.Fatalf("%d deferral events, want 1 (one per episode):\n%s", len(got), r.log)
	}
	// What it waits for changes: one more event, naming it.
	r.sd.setDep("postgresql.service", "failed")
	r.tick(time.Second)
	if got := r.lines("scale-up deferred", "postgresql.service (failed)"); len(got) != 1 {
		t.Errorf("no event for the changed wait:\n%s", r.log)
	}
	r.sd.setDep("postgresql.service", "active")
	r.tick(time.Second)
	if n := r.sd.count("active"); n != 3 {
		t.Fatalf("%d active once the required units are, want 3\n%s", n, r.log)
	}
	if got := r.lines("releasing the deferred scale-up"); len(got) != 1 {
		t.Errorf("%d release events, want 1:\n%s", len(got), r.log)
	}
	if spec := r.sd.specs["flexiq-work@1.service"]; !reflect.DeepEqual(spec.Requires, cfg.Requires) {
		t.Errorf("worker spec Requires = %q, want %q", spec.Requires, cfg.Requires)
	}
}

// A start skipped by its condition is not a crash, arms no backoff, is
// retried once per poll interval (not at every wake-up), and logs once.
func TestConditionSkipIsNotACrash(t *testing.T) {
	cfg := testPool("work")
	cfg.StartCondition = []string{"/bin/sh", "-c", "test -e /srv/ready"}
	cfg.PollInterval = 2 * time.Second
	r := newRig(t, cfg)
	r.sd.condFails = true
	r.start(r.pool)
	if n := r.sd.startCount(); n != 1 {
		t.Fatalf("%d start attempts, want 1", n)
	}
	// Wake-ups every 250 ms: no attempt before the poll interval is up.
	for range 7 {
		r.tick(250 * time.Millisecond)
	}
	if n := r.sd.startCount(); n != 1 {
		t.Errorf("%d start attempts within the poll interval, want 1 (no hot loop)", n)
	}
	r.tick(time.Second) // 2.75 s after the skip
	if n := r.sd.startCount(); n != 2 {
		t.Errorf("%d start attempts after the poll interval, want 2", n)
	}
	if got := r.lines("skipped: start_condition not met"); len(got) != 1 {
		t.Errorf("%d condition-skip events, want 1:\n%s", len(got), r.log)
	}
	if got := append(r.lines("crashed"), r.lines("failed to start")...); len(got) != 0 {
		t.Errorf("a skip was reported as a crash or failed start:\n%s", strings.Join(got, "\n"))
	}
	if len(r.pool.workers.Slots.Backoff) != 0 {
		t.Errorf("a skip armed a backoff: %v", r.pool.workers.Slots.Backoff)
	}
	r.sd.condFails = false
	r.tick(2 * time.Second)
	if n := r.sd.count("active"); n != 1 {
		t.Fatalf("%d active once the condition passes, want 1\n%s", n, r.log)
	}
	if got := r.lines("start_condition passes", "after 2 skipped"); len(got) != 1 {
		t.Errorf("no event for the passing condition:\n%s", r.log)
	}
}

// A scale-up beyond the host's budget is cut to what fits, once logged,
// and not retried at every tick as a pending start; the pools share the
// budget.
func TestCapacityExhausted(t *testing.T) {
	ledger := capacity.NewLedger(capacity.Budget{Cores: 3, Memory: 1 << 40})
	cfg := testPool("work")
	cfg.Limits.CPUQuotaPerSecUSec = 1_000_000 // one core each
	r := newRig(t, cfg)
	r.ledger = ledger
	r.pool = r.newPool()
	r.start(r.pool)
	r.src.set(80, 0, nil) // demand for 8
	r.tick(time.Second)
	if n := r.sd.count("active"); n != 3 {
		t.Fatalf("%d active, want 3 (the budget's cores)\n%s", n, r.log)
	}
	for range 5 {
		r.tick(time.Second)
	}
	if n := r.sd.startCount(); n != 3 {
		t.Errorf("%d start attempts, want 3: skipped starts must not be retried as pending", n)
	}
	if got := r.lines("capacity exhausted", "5 of 7 workers"); len(got) != 1 {
		t.Errorf("want one capacity-exhausted event for the 5 skipped:\n%s", r.log)
	}

	// Another pool on the same host: no room at all.
	other := newRig(t, testPool("other"))
	other.sd = r.sd
	other.cfg.Limits.CPUQuotaPerSecUSec = 500_000
	other.ledger = ledger
	other.pool = other.newPool()
	other.start(other.pool)
	if n := len(r.sd.unitsIn("active")); n != 3 {
		t.Errorf("%d active across pools, want 3", n)
	}
	if got := other.lines("capacity exhausted", "pool=other"); len(got) != 1 {
		t.Errorf("the other pool logged no capacity-exhausted event:\n%s", other.log)
	}

	// Demand falls: the first pool drains, and the room comes back.
	r.sd.stopNow = true
	r.cfg.ScaleDownWindow = 0
	r.src.set(0, 0, nil)
	r.tick(time.Second)
	r.tick(time.Second) // the drained units are gone: their room is free
	other.tick(time.Second)
	if n := other.sd.count("active"); n != 2 {
		t.Errorf("%d active after the first pool shrank to 1, want 2 (1 + the other's 1)\n%s\n%s", n, r.log, other.log)
	}
}

func quietPool() *config.Pool {
	cfg := testPool("work")
	cfg.QuietSignal, cfg.QuietSignalNumber, cfg.QuietPeriod = "SIGTSTP", 20, 10*time.Second
	cfg.ScaleDownWindow = 0
	return cfg
}

// Two-phase drain: the quiet signal first, the worker stops counting at
// once, and its stop comes at the end of quiet_period_sec, not before.
func TestQuietPhase(t *testing.T) {
	r := newRig(t, quietPool())
	r.start(r.pool)
	r.src.set(30, 0, nil)
	r.tick(time.Second)
	if n := r.sd.count("active"); n != 3 {
		t.Fatalf("%d active, want 3", n)
	}
	r.src.set(0, 0, nil)
	r.tick(time.Second)
	if len(r.sd.kills) != 2 || len(r.sd.stops) != 0 {
		t.Fatalf("kills %v, stops %v: want 2 quiet signals and no stop", r.sd.kills, r.sd.stops)
	}
	if st := r.pool.Status(); st.Current != 1 || st.Draining != 2 {
		t.Errorf("status %+v: want 1 current and 2 draining", st)
	}
	if got := r.lines("quiet phase, SIGTSTP sent"); len(got) != 2 {
		t.Errorf("%d draining events for the quiet phase, want 2:\n%s", len(got), r.log)
	}
	if _, err := os.Stat(r.pool.workers.QuietFile.Path()); err != nil {
		t.Errorf("no quiet file: %v", err)
	}
	r.tick(9 * time.Second)
	if len(r.sd.stops) != 0 {
		t.Fatalf("stopped %v before the quiet period was over", r.sd.stops)
	}
	r.tick(time.Second)
	if len(r.sd.stops) != 2 {
		t.Fatalf("stops %v at the end of the quiet period, want 2", r.sd.stops)
	}
	if got := r.lines("quiet phase of"); len(got) != 2 {
		t.Errorf("%d quiet-over events, want 2:\n%s", len(got), r.log)
	}
	for _, u := range r.sd.unitsIn("deactivating") {
		r.sd.finish(u, "success")
	}
	r.tick(time.Second)
	if got := r.lines("stopped, Result=success"); len(got) != 2 {
		t.Errorf("%d stopped events, want 2:\n%s", len(got), r.log)
	}
	if _, err := os.Stat(r.pool.workers.QuietFile.Path()); !os.IsNotExist(err) {
		t.Errorf("quiet file left behind: %v", err)
	}
}

// A restart of the daemon during the quiet phase keeps it: the worker is
// not adopted as live, and its stop comes at the same deadline.
func TestQuietPhaseSurvivesRestart(t *testing.T) {
	cases := []struct {
		name      string
		restarted bool // the unit was restarted meanwhile: a new worker
	}{
		{"same worker", false},
		{"worker restarted meanwhile", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, quietPool())
			r.start(r.pool)
			r.src.set(20, 0, nil)
			r.tick(time.Second)
			r.src.set(0, 0, nil)
			r.tick(time.Second)
			if len(r.sd.kills) != 1 {
				t.Fatalf("kills %v, want 1", r.sd.kills)
			}
			quieted := r.sd.kills[0]
			if tc.restarted {
				r.sd.mu.Lock()
				r.sd.units[quieted].InvocationID = "restarted"
				r.sd.mu.Unlock()
			}
			r.clock.advance(4 * time.Second)
			r.pool = r.newPool()
			r.start(r.pool)
			if tc.restarted {
				if st := r.pool.Status(); st.Current != 2 {
					t.Errorf("status %+v: a restarted unit is a live worker again", st)
				}
				return
			}
			if st := r.pool.Status(); st.Current != 1 || st.Draining != 1 {
				t.Errorf("status %+v after the restart: want 1 current, 1 draining", st)
			}
			if got := r.lines("resumed the quiet phase of " + quieted); len(got) != 1 {
				t.Errorf("no resume event:\n%s", r.log)
			}
			r.tick(5 * time.Second) // 9 s into the quiet phase
			if len(r.sd.stops) != 0 {
				t.Fatalf("stopped %v early", r.sd.stops)
			}
			r.tick(time.Second)
			if !reflect.DeepEqual(r.sd.stops, []string{quieted}) {
				t.Fatalf("stops %v at the deadline, want [%s]", r.sd.stops, quieted)
			}
		})
	}
}

// Draining the whole pool cuts the quiet phases short.
func TestDrainEndsQuietPhases(t *testing.T) {
	r := newRig(t, quietPool())
	r.sd.stopNow = true
	r.start(r.pool)
	r.src.set(20, 0, nil)
	r.tick(time.Second)
	r.src.set(0, 0, nil)
	r.tick(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.pool.Drain(ctx, "test")
	if ctx.Err() != nil {
		t.Fatalf("Drain did not end: quiet workers never stopped\n%s", r.log)
	}
	if n := len(r.sd.units); n != 0 {
		t.Errorf("%d units left", n)
	}
}

// A worker whose quiet signal cannot be sent is stopped at once rather
// than left live.
func TestQuietSignalFailureStopsAtOnce(t *testing.T) {
	r := newRig(t, quietPool())
	r.start(r.pool)
	r.src.set(20, 0, nil)
	r.tick(time.Second)
	r.sd.killErr = errors.New("the bus went away")
	r.src.set(0, 0, nil)
	r.tick(time.Second)
	if len(r.sd.kills) != 0 || !reflect.DeepEqual(r.sd.stops, []string{"flexiq-work@2.service"}) {
		t.Errorf("kills %v, stops %v: want no quiet phase and the stop at once", r.sd.kills, r.sd.stops)
	}
	if got := r.lines("cannot send SIGTSTP"); len(got) != 1 {
		t.Errorf("no warning about the quiet signal:\n%s", r.log)
	}
	if len(r.pool.workers.Quiet) != 0 {
		t.Errorf("quiet workers %v, want none", r.pool.workers.Quiet)
	}
}
