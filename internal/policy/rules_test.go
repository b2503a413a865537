package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCompileRuleErrors(t *testing.T) {
	tests := []struct {
		when string
		want string
	}{
		{"pending > ", "column"},
		{"pendng > 0", "column 1: unknown name pendng"},
		{"pending > 0 &&\nfoo", "line 2, column 1: unknown name foo"},
		{`pending + 1`, "expected bool"},
		{`promql(1)`, "column"},
		{`promql("a" + "b")`, "promql() takes one string literal"},
		{`promql("")`, "promql(): the query is empty"},
		{`promql("a", "b")`, "promql() takes one string literal"},
		{`host_cpu > "x"`, "invalid operation"},
	}
	for _, tt := range tests {
		t.Run(tt.when, func(t *testing.T) {
			_, err := CompileRule(Rule{When: tt.when, Step: 1})
			var ee *ExprError
			if !errors.As(err, &ee) {
				t.Fatalf("CompileRule(%q) = %v, want an *ExprError", tt.when, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CompileRule(%q) = %q, want it to contain %q", tt.when, err, tt.want)
			}
		})
	}
}

func TestCompileRuleCollects(t *testing.T) {
	c, err := CompileRule(Rule{When: `pending > 0 && host_cpu_ema < 0.65 || promql("up == 0") || promql("x") && promql("up == 0")`, Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Queries, []string{"up == 0", "x"}) {
		t.Errorf("queries %q", c.Queries)
	}
	if !slices.Equal(c.Signals, []string{"pending", "host_cpu_ema"}) {
		t.Errorf("signals %q", c.Signals)
	}
}

func TestRulesDecide(t *testing.T) {
	t0 := time.Unix(10_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	p := Params{MinWorkers: 1, MaxWorkers: 5}
	// The n8n autoscaler: up one when work waits and there is headroom,
	// down one after 120 s idle, 90 s between decisions.
	n8nUp := []Rule{{When: "pending > 0 && host_cpu < 0.65", Cooldown: 90 * time.Second, Step: 1}}
	n8nDown := &Rule{When: "idle_sec >= 120", Cooldown: 90 * time.Second, Step: 1}
	host := func(cpu float64) Signals { return Signals{Host: HostReading{CPU: cpu, CPUKnown: true}} }
	obs := func(c int, pending, running int64) Observation {
		return Observation{Valid: true, Current: c, Pending: pending, Running: running}
	}
	type step struct {
		at      int
		o       Observation
		s       Signals
		prom    map[string]PromResult
		action  Action
		desired int
		rule    string
		why     string
	}
	tests := []struct {
		name  string
		up    []Rule
		down  *Rule
		steps []step
	}{
		{"n8n: up with headroom, cooldown, then up again", n8nUp, n8nDown, []step{
			{0, obs(1, 5, 0), host(0.3), nil, ScaleUp, 2, "scale_up[0]", "rule scale_up[0]"},
			{30, obs(2, 5, 0), host(0.3), nil, Stable, 2, "", "in its cooldown"},
			{90, obs(2, 5, 0), host(0.3), nil, ScaleUp, 3, "scale_up[0]", ""},
		}},
		{"n8n: no headroom, no scale-up", n8nUp, n8nDown, []step{
			{0, obs(1, 5, 0), host(0.7), nil, Stable, 1, "", "no rule holds"},
		}},
		{"n8n: down after idle", n8nUp, n8nDown, []step{
			{0, obs(3, 0, 1), host(0.1), nil, Stable, 3, "", ""},
			{60, obs(3, 0, 0), host(0.1), nil, Stable, 3, "", ""},
			{119, obs(3, 0, 0), host(0.1), nil, Stable, 3, "", ""},
			{120, obs(3, 0, 0), host(0.1), nil, ScaleDown, 2, "scale_down", ""},
			{150, obs(2, 0, 0), host(0.1), nil, Stable, 2, "", "cooldown"},
			{210, obs(2, 0, 0), host(0.1), nil, ScaleDown, 1, "scale_down", ""},
			{400, obs(1, 0, 0), host(0.1), nil, Stable, 1, "scale_down", "clamped"},
		}},
		{"missing queue data holds", n8nUp, n8nDown, []step{
			{0, Observation{Current: 3}, host(0.1), nil, Hold, 3, "", "source unavailable"},
			{1, Observation{Current: 0}, host(0.1), nil, ScaleUp, 1, "", "raised to min_workers"},
		}},
		{"an unknown signal holds", n8nUp, n8nDown, []step{
			{0, obs(2, 5, 0), Signals{}, nil, Hold, 2, "scale_up[0]", "host_cpu is unknown"},
		}},
		{"first rule that holds wins, with its step", []Rule{
			{When: "oldest_age > 300", Step: 3},
			{When: "pending > 0", Step: 1},
		}, nil, []step{
			{0, obs(1, 5, 0), Signals{OldestAge: 400, OldestKnown: true}, nil, ScaleUp, 4, "scale_up[0]", "step 3"},
			{1, obs(4, 5, 0), Signals{OldestAge: 10, OldestKnown: true}, nil, ScaleUp, 5, "scale_up[1]", ""},
			{2, obs(5, 5, 0), Signals{OldestAge: 400, OldestKnown: true}, nil, Stable, 5, "scale_up[0]", "clamped to 1..5"},
		}},
		{"promql: fires, empty or zero does not, error holds", []Rule{{When: `promql("q") && workers < 5`, Step: 1}},
			&Rule{When: `!promql("q")`, Step: 1}, []step{
				{0, obs(2, 0, 0), Signals{}, map[string]PromResult{"q": {Fires: true}}, ScaleUp, 3, "scale_up[0]", ""},
				{1, obs(3, 0, 0), Signals{}, map[string]PromResult{"q": {}}, ScaleDown, 2, "scale_down", ""},
				{2, obs(2, 0, 0), Signals{}, map[string]PromResult{"q": {Err: errors.New("connection refused")}}, Hold, 2, "scale_up[0]", "connection refused"},
				{3, obs(2, 0, 0), Signals{}, nil, Hold, 2, "scale_up[0]", "no result"},
			}},
		{"no scale-down rule never scales down", []Rule{{When: "pending > 100", Step: 1}}, nil, []step{
			{0, obs(4, 0, 0), Signals{}, nil, Stable, 4, "", ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := CompileRules(tt.up, tt.down)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tt.steps {
				d := rs.Decide(at(st.at), p, st.o, st.s, st.prom)
				if d.Action != st.action || d.Desired != st.desired || d.Rule != st.rule {
					t.Errorf("step %d: %s %d rule %q, want %s %d rule %q (%s)", i, d.Action, d.Desired, d.Rule, st.action, st.desired, st.rule, d.Rationale)
				}
				if !strings.Contains(d.Rationale, st.why) {
					t.Errorf("step %d: rationale %q, want it to contain %q", i, d.Rationale, st.why)
				}
				rs.Acted(d)
			}
		})
	}
}

func TestCompileRulesNamesTheRule(t *testing.T) {
	_, err := CompileRules([]Rule{{When: "true", Step: 1}, {When: "nope", Step: 1}}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "scale_up[1].when: column 1: unknown name nope") {
		t.Errorf("err = %v", err)
	}
	_, err = CompileRules(nil, &Rule{When: "1", Step: 1})
	if err == nil || !strings.HasPrefix(err.Error(), "scale_down.when: ") {
		t.Errorf("err = %v", err)
	}
}
