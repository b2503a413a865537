package coord

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

func TestSingleHostLeadsAndFollowsItsPlan(t *testing.T) {
	s := newSim(t, 20)
	s.pending = 60
	h := s.hosts[0]
	s.tick()
	st := h.c.Snapshot()
	if !st.Leader || st.Epoch != 1 || st.Target != 6 || st.Apply.Phase != fleet.PhaseFresh {
		t.Fatalf("after one tick: leader %v epoch %d target %d phase %s, want leader at epoch 1 applying 6 (fresh)", st.Leader, st.Epoch, st.Target, st.Apply.Phase)
	}
	if want := (Calls{Heartbeat: 1, Acquire: 1, ReadPlan: 1, Members: 1, WritePlan: 1}); st.Calls != want {
		t.Errorf("first tick's calls %+v, want %+v", st.Calls, want)
	}
	s.tick()
	if st := h.c.Snapshot(); st.Calls != (Calls{Heartbeat: 1, Members: 1, WritePlan: 1}) || st.Target != 6 {
		t.Errorf("second tick: calls %+v target %d, want heartbeat, members, write; 6", st.Calls, st.Target)
	}
	if got := count(h.events, LeaderGained); got != 1 {
		t.Errorf("%d leader-gained events, want 1", got)
	}
	select {
	case <-h.c.Changed():
	default:
		t.Error("no change signalled")
	}
}

func TestThreeHostsOneLeaderAndTheSplit(t *testing.T) {
	s := newSim(t, 20, 20, 10)
	// The split is sticky: the first plan, made before the others'
	// first heartbeat, puts min_workers on the first host; the burst
	// then grows the others towards their proportional share.
	s.run(2, nil)
	s.pending = 100 // 10 workers for the fleet
	s.run(20, func() {
		if n := len(s.leaders()); n != 1 && s.ticks > 1 {
			t.Fatalf("tick %d: %d leaders", s.ticks, n)
		}
	})
	if got, want := s.lives(), []int{4, 4, 2}; !slices.Equal(got, want) {
		t.Errorf("lives %v, want %v (10 split by capacity 20:20:10)", got, want)
	}
	for _, h := range s.hosts {
		if st := h.c.Snapshot(); st.Plan.Target != 10 || st.Apply.Phase != fleet.PhaseFresh {
			t.Errorf("%s: plan target %d phase %s", h.id, st.Plan.Target, st.Apply.Phase)
		}
	}
	var last uint64
	for _, w := range s.store.writes {
		if !w.Accepted || w.Epoch < last {
			t.Errorf("write %+v refused or epoch decreased (was %d)", w, last)
		}
		last = w.Epoch
	}
}

// TestCallsPerTick is the O(1) figure: store calls per host per
// tick, at 3 hosts and at 100, in steady state over 100 ticks.
func TestCallsPerTick(t *testing.T) {
	for _, n := range []int{3, 100} {
		caps := make([]int, n)
		for i := range caps {
			caps[i] = 10
		}
		s := newSim(t, caps...)
		s.pending = 200
		s.run(10, nil)
		before := make([]Calls, n)
		for i, h := range s.hosts {
			before[i] = h.c.Snapshot().Total
		}
		const ticks = 100
		var lead, follow Calls
		var followers int
		s.run(ticks, func() {
			for _, h := range s.hosts {
				if c := h.c.Snapshot().Calls.Sum(); c > 4 {
					t.Errorf("%d hosts: %s made %d calls in a tick", n, h.id, c)
				}
			}
		})
		for i, h := range s.hosts {
			d := h.c.Snapshot().Total
			d = Calls{d.Acquire - before[i].Acquire, 0, d.Heartbeat - before[i].Heartbeat, d.Members - before[i].Members, d.WritePlan - before[i].WritePlan, d.ReadPlan - before[i].ReadPlan}
			if h.c.Snapshot().Leader {
				lead = d
			} else {
				follow, followers = follow.add(d), followers+1
			}
		}
		lt, ft := float64(lead.Sum())/ticks, float64(follow.Sum())/float64(ticks*followers)
		t.Logf("%d hosts: leader %.2f calls/tick %+v; follower %.2f calls/tick (mean)", n, lt, lead, ft)
		if lead.WritePlan != ticks || lt > 3.7 || ft > 2.7 {
			t.Errorf("%d hosts: leader %.2f (writes %d), follower %.2f calls a tick: want the plan every tick, <= 3 + 1 acquire per renewal, <= 2 + 1 per renewal", n, lt, lead.WritePlan, ft)
		}
	}
}

func TestEventsOncePerEpisodeAndResignStops(t *testing.T) {
	s := newSim(t, 10)
	s.pending = 30
	h := s.hosts[0]
	s.run(3, nil)
	s.store.down = true
	s.run(30, nil)
	s.store.down = false
	s.run(5, nil)
	for k, want := range map[Kind]int{LeaderGained: 2, LeaderLost: 1, StoreUnreachable: 1, StoreRecovered: 1, PlanStale: 1, PlanFallback: 1, PlanFresh: 1} {
		if got := count(h.events, k); got != want {
			t.Errorf("%d %s events, want %d: %+v", got, k, want, h.events)
		}
	}
	for _, e := range h.events {
		if e.Kind == LeaderLost && e.Reason != ReasonExpired {
			t.Errorf("lost with %s, want expired (the store went silent)", e.Reason)
		}
	}
	if err := h.c.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := h.c.Snapshot(); st.Leader || s.store.lease.Holder != "" {
		t.Errorf("after Resign: leader %v, lease %+v", st.Leader, s.store.lease)
	}
	n := len(s.store.writes)
	s.run(3, nil)
	if len(s.store.writes) != n || h.events[len(h.events)-1].Reason != ReasonResigned {
		t.Errorf("a resigned coordinator wrote again, or no resigned event: %+v", h.events)
	}
}

func TestNewChecks(t *testing.T) {
	st := newFakeStore(&fakeClock{t: t0}).as("a")
	ok := Deps{Store: st, Self: func() fleet.Member { return fleet.Member{} }, Pipeline: pipeline(),
		Source: func(context.Context, time.Time, fleet.Totals) (Input, error) { return Input{}, errors.New("x") }}
	for _, tc := range []struct {
		name string
		cfg  Config
		deps Deps
		ok   bool
	}{
		{"defaults", Config{Pool: "web", ID: "a"}, ok, true},
		{"no id", Config{Pool: "web"}, ok, false},
		{"no store", Config{Pool: "web", ID: "a"}, Deps{Self: ok.Self, Source: ok.Source, Pipeline: ok.Pipeline}, false},
		{"tick not inside the ttl", Config{Pool: "web", ID: "a", Interval: 10 * time.Second, TTL: 15 * time.Second}, ok, false},
	} {
		if _, err := New(tc.cfg, tc.deps); (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
