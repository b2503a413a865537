package coord

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// TestStoreUnreachable: every host holds its last target, then (the plan
// past TTL + hold) falls back without moving either way: no scale-down
// because coordination failed, no growth without the store. Then the
// store returns and the fleet converges on the plan again.
func TestStoreUnreachable(t *testing.T) {
	s := steady(t)
	want := s.lives()
	s.store.down = true
	s.pending = 0 // a decision now would scale down: none may happen
	phases := map[fleet.Phase]bool{}
	s.run(int((ttl+2*ttl)/interval)+4, func() {
		if got := s.lives(); !slices.Equal(got, want) {
			t.Fatalf("tick %d: lives %v, want %v held", s.ticks, got, want)
		}
		for _, h := range s.hosts {
			phases[h.c.Snapshot().Apply.Phase] = true
		}
	})
	if !phases[fleet.PhaseHold] || !phases[fleet.PhaseFallback] {
		t.Errorf("phases seen %v, want hold then fallback", phases)
	}
	if n := len(s.leaders()); n != 0 {
		t.Errorf("%d leaders after a silent store for longer than the TTL", n)
	}
	for _, h := range s.hosts {
		if count(h.events, StoreUnreachable) != 1 || count(h.events, PlanStale) != 1 {
			t.Errorf("%s: events %+v, want one unreachable and one stale", h.id, h.events)
		}
	}
	s.store.down = false
	s.pending = 150
	s.run(4, nil)
	if len(s.leaders()) != 1 || s.total() != 15 {
		t.Errorf("after the store returned: %d leaders, lives %v, want 1 leader and 15", len(s.leaders()), s.lives())
	}
}

// TestPartitionedFollower: one follower cut off holds its last target and
// never grows while the fleet's target rises; the others take its share
// only once it is gone (GoneBeats heartbeats); when it returns no host is
// over capacity and the total converges again.
func TestPartitionedFollower(t *testing.T) {
	s := steady(t)
	var cut *host
	for _, h := range s.hosts {
		if !h.c.Snapshot().Leader {
			cut = h
			break
		}
	}
	held := cut.live
	s.store.cut[cut.id] = true
	s.pending = 150
	cutAt := s.clk.Now()
	s.run(int(3*ttl/interval), func() {
		if cut.live > held {
			t.Fatalf("the cut-off host grew to %d (held %d)", cut.live, held)
		}
		// Its share stays in the plan until it is gone (the planner
		// cannot tell a cut host from a slow one), and leaves after.
		_, in := s.leaders()[0].c.Snapshot().Plan.Shares[cut.id]
		if gone := s.clk.Now().Sub(cutAt) > fleet.GoneAfter(interval); in == gone {
			t.Errorf("%s after the cut: in the plan %v", s.clk.Now().Sub(cutAt), in)
		}
	})
	if s.total() != 15+held {
		t.Errorf("lives %v: the others should run 15 between them, the cut host its %d", s.lives(), held)
	}
	s.store.cut[cut.id] = false
	s.run(30, func() {
		for _, h := range s.hosts {
			if h.live > h.capacity {
				t.Fatalf("%s over capacity: %d", h.id, h.live)
			}
		}
	})
	if s.total() != 15 {
		t.Errorf("after the link returned: lives %v, want 15 in total", s.lives())
	}
}

// TestSlowLeader: every call of the leader takes 1 s (a slow link): no
// flapping, one plan a tick.
func TestSlowLeader(t *testing.T) {
	s := steady(t)
	l := s.leaders()[0]
	epoch := l.c.Snapshot().Epoch
	s.store.delay[l.id] = time.Second
	n := len(s.store.writes)
	s.run(30, func() {
		if ls := s.leaders(); len(ls) != 1 || ls[0] != l || l.c.Snapshot().Epoch != epoch {
			t.Fatalf("tick %d: leadership moved", s.ticks)
		}
	})
	if got := len(s.store.writes) - n; got != 30 {
		t.Errorf("%d plans in 30 ticks, want one a tick", got)
	}
}

// TestWakeAcquiresAtOnce: a follower does not Acquire between renewals
// while the lease looks live, unless woken (the released notification).
func TestWakeAcquiresAtOnce(t *testing.T) {
	s := newSim(t, 10, 10)
	s.run(3, nil)
	f := s.hosts[1]
	if f.c.Snapshot().Leader {
		t.Fatal("h1 leads")
	}
	for _, wake := range []bool{false, true} {
		// Just after its own attempt, the next is a renewal away.
		for s.tick(); f.c.Snapshot().Calls.Acquire == 0; s.tick() {
		}
		if wake {
			f.c.Wake()
		}
		s.tick()
		if got := f.c.Snapshot().Calls.Acquire; got != map[bool]int{false: 0, true: 1}[wake] {
			t.Errorf("wake %v: %d acquires the tick after one", wake, got)
		}
	}
}

// TestRun runs the loop on the real clock: its first tick is at once; the
// snapshot is read from another goroutine (the race detector checks the
// single-owner model); Resign after Run returned releases the lease.
func TestRun(t *testing.T) {
	st := newFakeStore(&fakeClock{t: t0})
	c, err := New(Config{Pool: "web", ID: "a", Interval: time.Hour, TTL: 3 * time.Hour}, Deps{
		Store: st.as("a"), Pipeline: pipeline(),
		Self: func() fleet.Member { return fleet.Member{Capacity: 5} },
		Source: func(context.Context, time.Time, fleet.Totals) (Input, error) {
			return Input{Params: params()}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	<-c.Changed()
	if s := c.Snapshot(); !s.Leader || s.Target != 2 {
		t.Errorf("after the first tick: %+v", s)
	}
	cancel()
	<-done
	if err := c.Resign(context.Background()); err != nil || st.lease.Holder != "" {
		t.Errorf("resign: %v, lease %+v", err, st.lease)
	}
}

// TestNoPlan: without any plan, a host falls back to its share of
// min_workers while the store answers, and starts nothing while it does
// not; a leader whose source fails keeps writing the last plan (fresh,
// re-split over the live hosts) rather than none.
func TestNoPlan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		down   bool
		srcErr bool
		want   int
		phase  fleet.Phase
	}{
		{"store down from the start", true, false, 0, fleet.PhaseNone},
		{"store up, source failing: no plan to write", false, true, 2, fleet.PhaseNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, 10)
			s.store.down = tc.down
			if tc.srcErr {
				s.srcErr = errors.New("source down")
			}
			s.run(5, nil)
			st := s.hosts[0].c.Snapshot()
			if st.Target != tc.want || st.Apply.Phase != tc.phase {
				t.Errorf("target %d phase %s (%s), want %d %s", st.Target, st.Apply.Phase, st.Apply.Why, tc.want, tc.phase)
			}
			if tc.srcErr && (st.SourceErr == nil || len(s.store.writes) != 0) {
				t.Errorf("source error %v, %d writes: want the error and no plan", st.SourceErr, len(s.store.writes))
			}
		})
	}
	// Before any plan, followers count the live members for their share
	// of min_workers 2 (one each), once a host is not alone: h0 came
	// first and alone (2), and fallback never lowers a target.
	s := newSim(t, 10, 10, 10)
	s.srcErr = errors.New("source down")
	s.run(5, nil)
	if got := s.lives(); !slices.Equal(got, []int{2, 1, 1}) {
		t.Errorf("no plan, 3 hosts: lives %v, want [2 1 1]", got)
	}
	s = steady(t)
	s.srcErr = errors.New("source down")
	n := len(s.store.writes)
	s.run(10, nil)
	if got := len(s.store.writes) - n; got != 10 || s.total() != 9 {
		t.Errorf("with the source failing: %d plans in 10 ticks, lives %v; want one a tick, 9 held", got, s.lives())
	}
	for _, h := range s.hosts {
		if p := h.c.Snapshot().Apply.Phase; p != fleet.PhaseFresh {
			t.Errorf("%s: phase %s, want fresh (the leader lives)", h.id, p)
		}
	}
}
