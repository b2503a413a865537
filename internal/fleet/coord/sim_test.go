package coord

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/policy"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

const (
	interval = 3 * time.Second
	ttl      = 15 * time.Second
	renew    = 5 * time.Second
)

func params() policy.Params {
	return policy.Params{
		MinWorkers: 2, MaxWorkers: 100,
		TargetQueueDepthPerWorker: 10, TargetUtilisation: 0.8, ThreadsPerWorker: 1,
		Tolerance: 0.1, ScaleUpWindow: 0, ScaleDownWindow: 60 * time.Second,
		PollInterval: interval, Demand: policy.DemandLittlesLaw, DemandWindow: 30 * time.Second, OnsetMinJobs: 3,
	}
}

func pipeline() *policy.Pipeline {
	return &policy.Pipeline{Strategy: policy.StrategyHPA, Rec: &policy.Recommender{}, Limiter: &policy.Limiter{}}
}

// host is one simulated daemon: its coordinator, its workers (applied at
// once: Live follows the published target, capped by capacity) and its
// own clock, which may stop (a paused process) or jump.
type host struct {
	id       string
	c        *Coordinator
	capacity int
	live     int
	dead     bool // the daemon is gone (stopped or killed): no ticks; its workers run on
	paused   bool
	frozen   *time.Time // a clock that stopped; nil: the shared one
	events   []Event
}

type sim struct {
	t       testing.TB
	clk     *fakeClock
	store   *fakeStore
	hosts   []*host
	pending int64
	srcErr  error // the source's read fails with it
	ticks   int
}

func newSim(t testing.TB, capacities ...int) *sim {
	t.Helper()
	s := &sim{t: t, clk: &fakeClock{t: t0}}
	s.store = newFakeStore(s.clk)
	for i, capa := range capacities {
		s.hosts = append(s.hosts, s.newHost(fmt.Sprintf("h%d", i), capa, float64(i)/float64(len(capacities))))
	}
	return s
}

func (h *host) self() fleet.Member {
	return fleet.Member{ID: h.id, Capacity: h.capacity, Live: h.live, Version: "test"}
}

func (s *sim) newHost(id string, capacity int, r float64) *host {
	h := &host{id: id, capacity: capacity}
	s.build(h, r, "")
	return h
}

// build gives h a new coordinator, of incarnation inc (a restarted
// daemon's is another).
func (s *sim) build(h *host, r float64, inc string) {
	id := h.id
	now := func() time.Time {
		if h.frozen != nil {
			return *h.frozen
		}
		return s.clk.Now()
	}
	c, err := New(Config{Pool: "web", ID: id, Incarnation: inc, Interval: interval, TTL: ttl, Renew: renew, MinWorkers: 2, Initial: -1}, Deps{
		Store: s.store.as(id), Now: now, Rand: func() float64 { return r },
		Self: h.self,
		Source: func(_ context.Context, _ time.Time, totals fleet.Totals) (Input, error) {
			if s.srcErr != nil {
				return Input{}, s.srcErr
			}
			return Input{Params: params(), Obs: policy.Observation{Valid: true, Pending: s.pending}, Signals: policy.Signals{Workers: totals.Live}}, nil
		},
		Pipeline: pipeline(),
		Events:   EventsFunc(func(e Event) { h.events = append(h.events, e) }),
	})
	if err != nil {
		s.t.Fatal(err)
	}
	h.c = c
}

// tick moves the shared clock by one interval and runs every host that
// runs; each applies its target at once.
func (s *sim) tick() {
	s.clk.Advance(interval)
	s.ticks++
	for _, h := range s.hosts {
		if h.dead || h.paused {
			continue
		}
		st := h.c.Step(context.Background())
		h.live = min(st.Target, h.capacity)
	}
}

func (s *sim) run(n int, each func()) {
	for range n {
		s.tick()
		if each != nil {
			each()
		}
	}
}

// leaders are the running hosts that lead after the last tick.
func (s *sim) leaders() []*host {
	var out []*host
	for _, h := range s.hosts {
		if !h.dead && !h.paused && h.c.Snapshot().Leader {
			out = append(out, h)
		}
	}
	return out
}

func (s *sim) total() int {
	n := 0
	for _, h := range s.hosts {
		n += h.live
	}
	return n
}

func (s *sim) lives() []int {
	out := make([]int, len(s.hosts))
	for i, h := range s.hosts {
		out[i] = h.live
	}
	return out
}

func count(evs []Event, k Kind) int {
	n := 0
	for _, e := range evs {
		if e.Kind == k {
			n++
		}
	}
	return n
}
