package policy

import (
	"strings"
	"testing"
	"time"
)

// A pool without a queue (a service's replicas with no source) through the
// pipeline that the daemon and simulate share: its decisions come from the
// CPU signal and the rules; the empty counts its source reports are never
// read as an idle queue.
func TestPipelineNoQueue(t *testing.T) {
	t0 := time.Unix(10_000, 0)
	cpu := func(current int, util float64) Observation {
		return Observation{Valid: true, Current: current, CPU: util, CPUKnown: true}
	}
	noCPU := Observation{Valid: true, Current: 4}
	hpa := func(p *Params) { p.TargetCPUUtilisation = 0.5 }
	tests := []struct {
		name     string
		strategy string
		params   func(*Params)
		up, down string // rules; "" none
		prom     map[string]PromResult
		o        Observation
		want     int
		action   Action
		why      string // substring of the rationale
	}{
		{"cpu high: up", StrategyHPA, hpa, "", "", nil, cpu(4, 0.9), 8, ScaleUp, "cpu=8"},
		{"cpu low: down (the window is the caller's)", StrategyHPA, hpa, "", "", nil, cpu(4, 0.1), 1, ScaleDown, "cpu=1"},
		{"no cpu reading: hold, not down to min", StrategyHPA, hpa, "", "", nil, noCPU, 4, Hold, "no queue"},
		{"no cpu signal at all: hold", StrategyHPA, nil, "", "", nil, noCPU, 4, Hold, "no queue"},
		{"the same with a queue: down to min", StrategyHPA, func(p *Params) { p.NoQueue = false }, "", "", nil, noCPU, 1, ScaleDown, ""},
		{"a promql rule: up", StrategyRules, nil, `promql("q")`, "", map[string]PromResult{"q": {Fires: true}}, noCPU, 5, ScaleUp, "scale_up[0]"},
		{"a failed promql: hold", StrategyRules, nil, "", `promql("q")`, map[string]PromResult{"q": {Err: errString("down")}}, noCPU, 4, Hold, "down"},
		{"no promql result: hold", StrategyRules, nil, "", `promql("q")`, nil, noCPU, 4, Hold, "no result"},
		{"a rule over the queue: hold, not an empty queue", StrategyRules, nil, "", "pending == 0", nil, noCPU, 4, Hold, "pending is unknown"},
		{"idle_sec: unknown", StrategyRules, nil, "", "idle_sec > 60", nil, noCPU, 4, Hold, "idle_sec is unknown"},
		{"worker_cpu: down", StrategyRules, nil, "", "worker_cpu < 0.2", nil, cpu(4, 0.1), 3, ScaleDown, "scale_down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := flexiqParams()
			p.NoQueue = true
			if tt.params != nil {
				tt.params(&p)
			}
			var rec Recommender
			var lim Limiter
			pl := Pipeline{Strategy: tt.strategy, Rec: &rec, Limiter: &lim}
			if tt.strategy == StrategyRules {
				var up []Rule
				var down *Rule
				if tt.up != "" {
					up = []Rule{{When: tt.up, Step: 1}}
				}
				if tt.down != "" {
					down = &Rule{When: tt.down, Step: 1}
				}
				rs, err := CompileRules(up, down)
				if err != nil {
					t.Fatal(err)
				}
				pl.Rules = rs
			}
			s := Signals{Workers: tt.o.Current, WorkerCPU: tt.o.CPU, WorkerCPUKnown: tt.o.CPUKnown}
			d := pl.Decide(Input{Now: t0, Params: p, Obs: tt.o, Signals: s, Prom: tt.prom}).Decision
			if d.Desired != tt.want || d.Action != tt.action || !strings.Contains(d.Rationale, tt.why) {
				t.Errorf("decision %d %s (%s), want %d %s (...%s...)", d.Desired, d.Action, d.Rationale, tt.want, tt.action, tt.why)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }
