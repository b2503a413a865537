package fleet

import (
	"errors"
	"maps"
	"math/rand"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

func fleetParams() policy.Params {
	return policy.Params{
		MinWorkers: 2, MaxWorkers: 100,
		TargetQueueDepthPerWorker: 10, TargetUtilisation: 0.8, ThreadsPerWorker: 1,
		Tolerance: 0.1, ScaleUpWindow: 0, ScaleDownWindow: 60 * time.Second,
		PollInterval: 5 * time.Second,
		Demand:       policy.DemandLittlesLaw, DemandWindow: 30 * time.Second, OnsetMinJobs: 3,
		KeepWarmWorkers: 6, KeepWarm: 90 * time.Second,
	}
}

func newPipeline() *policy.Pipeline {
	return &policy.Pipeline{
		Strategy: policy.StrategyHPA, Rec: &policy.Recommender{}, Limiter: &policy.Limiter{},
		Behavior: policy.Behavior{Up: policy.DirectionBehavior{Policies: []policy.RateLimit{{Type: policy.LimitWorkers, Value: 8, Period: 30 * time.Second}}}},
	}
}

func members(live ...int) []Member {
	ms := make([]Member, len(live))
	for i, l := range live {
		ms[i] = Member{ID: string(rune('a' + i)), Capacity: 20, Live: l}
	}
	return ms
}

func TestDecideSplitsTheFleetDecision(t *testing.T) {
	now := storeT0
	d, err := Decide(newPipeline(), Tick{
		Now: now, Epoch: 3, Params: fleetParams(),
		Obs:     policy.Observation{Valid: true, Pending: 60, Current: 999},
		Members: members(0, 0, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	// 60 pending at 10 a worker ask for 6; the fleet runs 0 (not the
	// 999 passed in), and the rate limit allows 8.
	if d.Result.Decision.Current != 0 || d.Plan.Target != 6 {
		t.Fatalf("decision %+v, plan target %d: want current 0, target 6", d.Result.Decision, d.Plan.Target)
	}
	if want := map[string]int{"a": 2, "b": 2, "c": 2}; !maps.Equal(d.Plan.Shares, want) {
		t.Errorf("shares %v, want %v", d.Plan.Shares, want)
	}
	if d.Plan.Epoch != 3 || !d.Plan.At.Equal(now) || len(d.Plan.State) == 0 || d.StateErr != nil {
		t.Errorf("plan %+v, state error %v", d.Plan, d.StateErr)
	}
	if d.Totals != (Totals{Hosts: 3, Capacity: 60}) {
		t.Errorf("totals %+v", d.Totals)
	}
}

func TestDecideCapacityShort(t *testing.T) {
	ms := []Member{{ID: "a", Capacity: 3}, {ID: "b", Capacity: 2}}
	d, err := Decide(newPipeline(), Tick{Now: storeT0, Epoch: 1, Params: fleetParams(), Obs: policy.Observation{Valid: true, Pending: 70}, Members: ms})
	if err != nil {
		t.Fatal(err)
	}
	if d.Plan.Target != 7 || !maps.Equal(d.Plan.Shares, map[string]int{"a": 3, "b": 2}) {
		t.Errorf("target %d shares %v: want the decision 7, each host full", d.Plan.Target, d.Plan.Shares)
	}
}

func TestDecideFenced(t *testing.T) {
	_, err := Decide(newPipeline(), Tick{Now: storeT0, Epoch: 4, Params: fleetParams(), Prev: Plan{Epoch: 5}})
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("err = %v, want ErrFenced", err)
	}
}

func TestDecideBadState(t *testing.T) {
	for _, state := range []string{"{not json", `{"v":99,"history":[{"at":1,"raw":50}]}`} {
		d, err := Decide(newPipeline(), Tick{Now: storeT0, Epoch: 2, Params: fleetParams(),
			Obs: policy.Observation{Valid: true, Pending: 0}, Members: members(10), Prev: Plan{Epoch: 1, State: []byte(state)}})
		if err != nil {
			t.Fatal(err)
		}
		if d.StateErr == nil {
			t.Errorf("state %q: no error", state)
		}
		// Afresh: nothing held by a window at 50.
		if d.Plan.Target >= 10 {
			t.Errorf("state %q: target %d, want a scale-down from 10 (no window)", state, d.Plan.Target)
		}
	}
}

// TestDecideContinuesAcrossLeaders runs one trace twice: through a single
// pipeline that lives across every tick (one host, or one leader for
// ever), and through Decide with a new pipeline at every tick (a new leader
// each time, continuing from the plan's State alone). The decisions must
// be the same: the windows, the rate limits, the onset's service time and
// the keep-warm tick all travel in the plan. A third run that drops the
// state must differ, or the test proves nothing.
func TestDecideContinuesAcrossLeaders(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	type step struct {
		obs  policy.Observation
		live int
	}
	var trace []step
	live := 0
	for i := 0; i < 200; i++ {
		o := policy.Observation{Valid: rng.Intn(20) > 0, Pending: int64(rng.Intn(4) * rng.Intn(120)), Running: int64(rng.Intn(10))}
		if rng.Intn(2) == 0 {
			o.DemandKnown, o.ArrivalRate, o.ServiceTime = true, rng.Float64()*3, time.Duration(1+rng.Intn(8))*time.Second
		}
		if o.Pending > 0 {
			o.OldestKnown, o.OldestAge = true, time.Duration(rng.Intn(20))*time.Second
		}
		trace = append(trace, step{obs: o, live: live})
		live = max(0, live+rng.Intn(7)-3)
	}
	params := fleetParams()
	single := newPipeline()
	var prev Plan
	var prevDrop Plan
	differs := false
	for i, s := range trace {
		now := storeT0.Add(time.Duration(i) * 5 * time.Second)
		o := s.obs
		// The fleet's current count is the last plan's target (within
		// the hosts' capacity, 100 here), the live total before any plan.
		o.Current = s.live
		if i > 0 {
			o.Current = prev.Target
		}
		want := single.Decide(policy.Input{Now: now, Params: params, Obs: o})
		single.Acted(now, want.Decision)

		ms := []Member{{ID: "a", Capacity: 50, Live: s.live / 2}, {ID: "b", Capacity: 50, Live: s.live - s.live/2}}
		d, err := Decide(newPipeline(), Tick{Now: now, Epoch: uint64(i + 1), Params: params, Obs: s.obs, Members: ms, Prev: prev})
		if err != nil || d.StateErr != nil {
			t.Fatalf("tick %d: %v, %v", i, err, d.StateErr)
		}
		if d.Plan.Target != want.Decision.Desired {
			t.Fatalf("tick %d: fleet decides %d (%s), a single pipeline %d (%s)", i, d.Plan.Target, d.Result.Decision.Rationale, want.Decision.Desired, want.Decision.Rationale)
		}
		prev = d.Plan

		dd, _ := Decide(newPipeline(), Tick{Now: now, Epoch: uint64(i + 1), Params: params, Obs: s.obs, Members: ms, Prev: prevDrop})
		if dd.Plan.Target != want.Decision.Desired {
			differs = true
		}
		prevDrop = dd.Plan
		prevDrop.State = nil
	}
	if !differs {
		t.Fatal("dropping the state changed no decision: the trace does not exercise the windows")
	}
}

func TestStateRoundTrip(t *testing.T) {
	now := storeT0
	pl := newPipeline()
	pl.Rules = &policy.RuleSet{LastFired: map[string]time.Time{"scale_up[0]": now.Add(-time.Minute), "scale_down": now.Add(time.Hour)}, LastBusy: now.Add(-time.Second)}
	pl.Rec.Restore(now, []policy.Sample{{At: now.Add(-30 * time.Second), Raw: 7}, {At: now.Add(-10 * time.Second), Raw: 3}})
	pl.Limiter.Restore(now, []policy.ScaleEvent{{At: now.Add(-20 * time.Second), Change: 4}})
	pl.Rec.RestoreMemory(now, policy.Memory{ServiceTime: 3 * time.Second, LastWork: now.Add(-5 * time.Second), Worked: true})
	b, err := EncodeState(pl)
	if err != nil {
		t.Fatal(err)
	}
	got := newPipeline()
	got.Rules = &policy.RuleSet{LastFired: map[string]time.Time{"stale": now}}
	if err := RestoreState(got, now, b); err != nil {
		t.Fatal(err)
	}
	if h := got.Rec.History(); len(h) != 2 || h[0].Raw != 7 || !h[1].At.Equal(now.Add(-10*time.Second)) {
		t.Errorf("history %v", h)
	}
	if e := got.Limiter.Events(); len(e) != 1 || e[0].Change != 4 || !e[0].At.Equal(now.Add(-20*time.Second)) {
		t.Errorf("events %v", e)
	}
	// The cooldown in the future is not from this clock: dropped, and the
	// pipeline's own stale entry is replaced.
	if lf := got.Rules.LastFired; len(lf) != 1 || !lf["scale_up[0]"].Equal(now.Add(-time.Minute)) || !got.Rules.LastBusy.Equal(now.Add(-time.Second)) {
		t.Errorf("rules %v %v", lf, got.Rules.LastBusy)
	}
	if m := got.Rec.Memory(); m.ServiceTime != 3*time.Second || !m.LastWork.Equal(now.Add(-5*time.Second)) || !m.Worked {
		t.Errorf("memory %+v", m)
	}
	// Empty state: everything afresh, no error.
	if err := RestoreState(got, now, nil); err != nil || len(got.Rec.History()) != 0 || len(got.Limiter.Events()) != 0 || len(got.Rules.LastFired) != 0 || got.Rec.Memory() != (policy.Memory{}) {
		t.Errorf("empty state: %v, history %v", err, got.Rec.History())
	}
}

// BenchmarkDecide100 is one leader tick at 100 hosts, the state decoded
// and encoded included.
func BenchmarkDecide100(b *testing.B) {
	ms := make([]Member, 100)
	for i := range ms {
		ms[i] = Member{ID: string(rune('A'+i/26)) + string(rune('a'+i%26)), Capacity: 20, Live: 5}
	}
	params := fleetParams()
	params.MaxWorkers = 2000
	var prev Plan
	for i := 0; i < b.N; i++ {
		now := storeT0.Add(time.Duration(i) * 5 * time.Second)
		d, err := Decide(newPipeline(), Tick{Now: now, Epoch: 1, Params: params,
			Obs: policy.Observation{Valid: true, Pending: int64(3000 + 1000*(i%5))}, Members: ms, Prev: prev})
		if err != nil {
			b.Fatal(err)
		}
		prev = d.Plan
	}
}

// TestFleetCurrentIsThePlan: the decision's current count is what the last
// plan gave the live hosts (capped at their capacity), not the live total
// caught mid-transition; the live total before any plan, or when none of
// the plan's hosts is live.
func TestFleetCurrentIsThePlan(t *testing.T) {
	prev := Plan{Epoch: 3, Target: 20, Shares: map[string]int{"a": 10, "b": 6, "c": 4}}
	for _, tc := range []struct {
		name    string
		prev    Plan
		members []Member
		want    int
	}{
		{"no plan yet", Plan{}, []Member{{ID: "a", Capacity: 10, Live: 7}}, 7},
		{"mid scale-down", prev, []Member{{ID: "a", Capacity: 10, Live: 12}, {ID: "b", Capacity: 8, Live: 6}, {ID: "c", Capacity: 6, Live: 6}}, 20},
		{"a host gone", prev, []Member{{ID: "a", Capacity: 10, Live: 10}, {ID: "b", Capacity: 8, Live: 6}}, 16},
		{"capacity lowered (a host leaving)", prev, []Member{{ID: "a", Capacity: 0, Live: 10}, {ID: "b", Capacity: 8, Live: 6}, {ID: "c", Capacity: 6, Live: 4}}, 10},
		{"none of its hosts live", prev, []Member{{ID: "d", Capacity: 10, Live: 3}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fleetCurrent(tc.prev, tc.members, Sum(tc.members)); got != tc.want {
				t.Errorf("fleetCurrent = %d, want %d", got, tc.want)
			}
		})
	}
}
