package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// demandSource is a fake source that also reads demand.
type demandSource struct {
	*fakeSource
	mu     sync.Mutex
	demand source.Demand
	err    error
	window time.Duration // the window last asked for
}

func (s *demandSource) Demand(ctx context.Context, now time.Time, window time.Duration) (source.Demand, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window = window
	return s.demand, s.err
}

// With demand = "littles-law", the source's arrival rate and service time
// reach the policy, and the decision's journal entry carries them.
func TestLittlesLawReachesThePolicyAndTheJournal(t *testing.T) {
	cfg := testPool("work")
	cfg.Demand, cfg.DemandWindow = policy.DemandLittlesLaw, 30*time.Second
	r := newRig(t, cfg)
	src := &demandSource{fakeSource: r.src}
	r.pool.src = src
	r.start(r.pool)
	r.tick(time.Second)

	// 2 jobs/s × 2.5 s = 5 busy threads; 1 thread per worker at 100%.
	src.mu.Lock()
	src.demand = source.Demand{ArrivalRate: 2, ServiceTime: 2500 * time.Millisecond, Known: true}
	src.mu.Unlock()
	r.tick(time.Second)
	if n := len(r.pool.workers.Slots.Live); n != 5 {
		t.Errorf("%d live workers, want 5 by Little's law", n)
	}
	if src.window != 30*time.Second {
		t.Errorf("the source was asked for a %s window, want demand_window_sec 30 s", src.window)
	}
	got := r.lines(`FLEXIQ_ACTION="scale-up"`, `FLEXIQ_ARRIVAL_RATE="2.000"`, `FLEXIQ_SERVICE_TIME="2.500"`,
		`FLEXIQ_LITTLES_LAW="5"`, "littles-law=5", "arrivals=2.00/s service=2.5s")
	if len(got) != 1 {
		t.Errorf("want one scale-up entry with the demand fields; journal:\n%s", r.log.String())
	}

	// A failing read is said once, and the signal sits out.
	src.mu.Lock()
	src.err = errors.New("disk on fire")
	src.mu.Unlock()
	r.tick(time.Second)
	r.tick(time.Second)
	if n := len(r.lines("cannot read arrivals and service times", "disk on fire")); n != 1 {
		t.Errorf("%d warnings about the failed read, want 1; journal:\n%s", n, r.log.String())
	}
}

// Without the knob the source is never asked, whatever it can do.
func TestDemandOffDoesNotRead(t *testing.T) {
	r := newRig(t, testPool("work"))
	src := &demandSource{fakeSource: r.src, demand: source.Demand{ArrivalRate: 100, ServiceTime: time.Minute, Known: true}}
	r.pool.src = src
	r.start(r.pool)
	r.tick(time.Second)
	r.tick(time.Second)
	if src.window != 0 || len(r.pool.workers.Slots.Live) != 1 {
		t.Errorf("window %s, %d workers: want the source never asked and min_workers 1", src.window, len(r.pool.workers.Slots.Live))
	}
	if got := r.lines("FLEXIQ_ARRIVAL_RATE"); len(got) != 0 {
		t.Errorf("demand fields without the knob: %q", got)
	}
}
