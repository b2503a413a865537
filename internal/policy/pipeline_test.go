package policy

import (
	"strings"
	"testing"
	"time"
)

func TestPipeline(t *testing.T) {
	t0 := time.Unix(10_000, 0)
	p := flexiqParams()
	upBy2 := Behavior{Up: DirectionBehavior{Policies: []RateLimit{{LimitWorkers, 2, 15 * time.Second}}}}
	block := &GuardInput{Verdict: Verdict{BlockUp: true, Reasons: []string{"host cpu 0.90"}}}
	emergency := &GuardInput{Verdict: Verdict{BlockUp: true, Emergency: true, Reasons: []string{"psi"}}, Victim: true, Due: true}
	rules := func(t *testing.T) *RuleSet {
		rs, err := CompileRules([]Rule{{When: "pending > 20", Step: 2}}, &Rule{When: "pending == 0", Step: 1})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	tests := []struct {
		name      string
		strategy  string
		rules     bool
		b         Behavior
		guard     *GuardInput
		o         Observation
		want      int
		action    Action
		rule      string // "-": any non-empty
		limit     string // substring
		outcome   GuardOutcome
		asked     int // the decision the guard was given
		strategyD int // the strategy's own decision
		forced    bool
	}{
		{"hpa alone", StrategyHPA, false, Behavior{}, nil, obs(50, 0, 1), 5, ScaleUp, "", "", GuardNone, 5, 5, false},
		{"rate limit after the strategy", StrategyHPA, false, upBy2, nil, obs(50, 0, 1), 3, ScaleUp, "", "scale_up rate limit: 3", GuardNone, 3, 5, false},
		{"guard after the rate limit", StrategyHPA, false, upBy2, block, obs(50, 0, 1), 1, Stable, "", "scale_up rate limit: 3", GuardBlocked, 3, 5, false},
		{"guard blocks a scale-up", StrategyHPA, false, Behavior{}, block, obs(50, 0, 1), 1, Stable, "", "", GuardBlocked, 5, 5, false},
		{"emergency takes one worker", StrategyHPA, false, Behavior{}, emergency, obs(30, 0, 3), 2, ScaleDown, "", "", GuardForced, 3, 3, true},
		{"emergency not due: held", StrategyHPA, false, Behavior{}, &GuardInput{Verdict: emergency.Verdict, Victim: true}, obs(30, 0, 3), 3, Stable, "", "", GuardNone, 3, 3, false},
		{"rules by name", StrategyRules, true, Behavior{}, nil, obs(50, 0, 1), 3, ScaleUp, "-", "", GuardNone, 3, 3, false},
		{"rules, rate limited", StrategyRules, true, Behavior{Up: DirectionBehavior{Policies: []RateLimit{{LimitWorkers, 1, 15 * time.Second}}}}, nil, obs(50, 0, 1), 2, ScaleUp, "-", "scale_up rate limit: 2", GuardNone, 2, 3, false},
		{"rules with none compiled: the hpa formula", StrategyRules, false, Behavior{}, nil, obs(50, 0, 1), 5, ScaleUp, "", "", GuardNone, 5, 5, false},
		{"unknown name: the hpa formula, the default", "nope", false, Behavior{}, nil, obs(50, 0, 1), 5, ScaleUp, "", "", GuardNone, 5, 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec Recommender
			var lim Limiter
			pl := Pipeline{Strategy: tt.strategy, Rec: &rec, Limiter: &lim, Behavior: tt.b}
			if tt.rules {
				pl.Rules = rules(t)
			}
			r := pl.Decide(Input{Now: t0, Params: p, Obs: tt.o, Signals: Signals{Workers: tt.o.Current}, Guard: tt.guard})
			d := r.Decision
			if d.Desired != tt.want || d.Action != tt.action {
				t.Errorf("decision %d %s, want %d %s (%s)", d.Desired, d.Action, tt.want, tt.action, d.Rationale)
			}
			if (tt.rule == "-") != (d.Rule != "") {
				t.Errorf("rule %q, want one: %v", d.Rule, tt.rule == "-")
			}
			if (tt.limit == "") != (d.Limit == "") || !strings.Contains(d.Limit, tt.limit) {
				t.Errorf("limit %q, want %q", d.Limit, tt.limit)
			}
			if d.Guard != tt.outcome {
				t.Errorf("guard %q, want %q", d.Guard, tt.outcome)
			}
			if r.Asked.Desired != tt.asked || r.Strategy.Desired != tt.strategyD {
				t.Errorf("asked %d, strategy %d; want %d, %d", r.Asked.Desired, r.Strategy.Desired, tt.asked, tt.strategyD)
			}
			if got := pl.Acted(t0, d); got != tt.forced {
				t.Errorf("Acted says forced=%v, want %v", got, tt.forced)
			}
		})
	}
}

// Acted feeds the next tick: the rate limits count what moved, and a rule's
// cooldown starts when it acted.
func TestPipelineActedFeedsTheNextTick(t *testing.T) {
	t0 := time.Unix(10_000, 0)
	p := flexiqParams()
	var rec Recommender
	var lim Limiter
	rs, err := CompileRules([]Rule{{When: "pending > 20", Step: 2, Cooldown: 30 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pl := Pipeline{Strategy: StrategyRules, Rec: &rec, Rules: rs, Limiter: &lim,
		Behavior: Behavior{Up: DirectionBehavior{Policies: []RateLimit{{LimitWorkers, 3, time.Minute}}}}}
	in := func(at time.Duration, current int) Input {
		return Input{Now: t0.Add(at), Params: p, Obs: obs(50, 0, current), Signals: Signals{Workers: current}}
	}
	d := pl.Decide(in(0, 1)).Decision
	if d.Desired != 3 {
		t.Fatalf("first tick: %d, want 3", d.Desired)
	}
	pl.Acted(t0, d)
	if d := pl.Decide(in(10*time.Second, 3)).Decision; d.Desired != 3 || d.Action == ScaleUp {
		t.Errorf("within the rule's cooldown: %d %s, want to hold at 3", d.Desired, d.Action)
	}
	pl.Acted(t0.Add(10*time.Second), Decision{Current: 3, Desired: 3, Action: Stable})
	d = pl.Decide(in(40*time.Second, 3)).Decision
	if d.Desired != 4 || !strings.Contains(d.Limit, "scale_up rate limit") {
		t.Errorf("after the cooldown, within the minute: %d (limit %q), want 4 by the rate limit", d.Desired, d.Limit)
	}
}

// A fleet's leader runs the rules its pool compiled, with a memory of its
// own: Fresh shares the compiled programs, which two goroutines may run at
// once (the pool's and the coordinator's), and nothing else.
func TestRuleSetFresh(t *testing.T) {
	rs, err := CompileRules([]Rule{{When: `pending > 20 && promql("up")`, Step: 2}}, &Rule{When: "pending == 0", Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(10_000, 0)
	rs.LastFired["scale_up[0]"] = t0
	fresh := rs.Fresh()
	if fresh.Up[0] != rs.Up[0] || fresh.Down != rs.Down {
		t.Error("Fresh compiled the rules again")
	}
	if len(fresh.LastFired) != 0 || !fresh.LastBusy.IsZero() {
		t.Errorf("Fresh kept the memory: %v, %v", fresh.LastFired, fresh.LastBusy)
	}
	p := flexiqParams()
	done := make(chan int)
	for k, set := range []*RuleSet{rs, fresh} {
		go func() {
			n := 0
			for i := range 2000 {
				fires := (i+k)%2 == 0 // each its own pattern
				d := set.Decide(t0, p, obs(50, 0, 1), Signals{}, map[string]PromResult{"up": {Fires: fires}})
				if (d.Rule == "scale_up[0]") != fires {
					n++
				}
			}
			done <- n
		}()
	}
	if bad := <-done + <-done; bad != 0 {
		t.Errorf("%d decisions read the other run's promql() results", bad)
	}
}

// The input's variables are the observation's, with what only the caller
// knows.
func TestNewInput(t *testing.T) {
	t0 := time.Unix(10_000, 0)
	o := Observation{Current: 3, Valid: true, Pending: 9, OldestAge: 1500 * time.Millisecond, OldestKnown: true, CPU: 0.5, CPUKnown: true}
	host := HostState{Reading: HostReading{CPU: 0.7, CPUKnown: true}, EMA: 0.6}
	prom := map[string]PromResult{"up": {Fires: true}}
	in := NewInput(t0, flexiqParams(), o, 4, 2, host, prom)
	want := Signals{Paused: 4, OldestAge: 1.5, OldestKnown: true, Workers: 3, Draining: 2, WorkerCPU: 0.5, WorkerCPUKnown: true,
		Host: host.Reading, HostCPUEMA: 0.6}
	if in.Signals != want || in.Obs != o || !in.Now.Equal(t0) || in.Guard != nil || !in.Prom["up"].Fires {
		t.Errorf("NewInput = %+v, want signals %+v", in, want)
	}
}
