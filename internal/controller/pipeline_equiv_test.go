package controller

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/simulate"
)

// The daemon and simulate run the same decision pipeline (policy.Pipeline):
// the same observations through both give the same decisions, and the
// daemon's explain steps for the pipeline's steps (rule, rate_limit,
// host_guard) say what simulate's output says. Issue 18.
func TestDaemonAndSimulateRunOnePipeline(t *testing.T) {
	pending := []int64{0, 40, 80, 80, 95, 95, 60, 30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0}
	limits := policy.Behavior{
		Up:   policy.DirectionBehavior{Policies: []policy.RateLimit{{Type: policy.LimitWorkers, Value: 2, Period: 3 * time.Second}}},
		Down: policy.DirectionBehavior{Cooldown: 4 * time.Second},
	}
	t.Run("hpa", func(t *testing.T) {
		cfg := testPool("eq")
		cfg.Scaling.Policy = config.PolicyHPA
		cfg.Scaling.Behavior = limits
		samePipeline(t, cfg, pending)
	})
	t.Run("rules", func(t *testing.T) {
		cfg := testPool("eq")
		cfg.Scaling.Policy = config.PolicyRules
		cfg.Scaling.ScaleUp = []policy.Rule{{When: "pending > 20", Cooldown: 2 * time.Second, Step: 3}}
		cfg.Scaling.ScaleDown = &policy.Rule{When: "pending == 0", Cooldown: 3 * time.Second, Step: 1}
		cfg.Scaling.Behavior = limits
		samePipeline(t, cfg, pending)
	})
}

func samePipeline(t *testing.T, cfg *config.Pool, pending []int64) {
	cfg.MaxSurge = 10 // every start at once, as simulate assumes
	cfg.ScaleDownWindow = 5 * time.Second

	// The daemon, tick by tick, one second apart (poll_interval).
	r := newRig(t, cfg)
	r.start(r.pool)
	var daemon []policy.Decision
	var steps [][]api.Step
	for _, n := range pending {
		r.src.set(n, 0, nil)
		r.clock.advance(time.Second)
		daemon = append(daemon, r.pool.Tick(context.Background()))
		ex := r.pool.Explain(1)
		steps = append(steps, ex[0].Steps)
	}

	// simulate, over the same observations from the same start.
	var trace strings.Builder
	trace.WriteString("t,pending,running\n")
	for i, n := range pending {
		fmt.Fprintf(&trace, "%d,%d,0\n", i+1, n)
	}
	var out bytes.Buffer
	if err := simulate.Run(cfg, strings.NewReader(trace.String()), daemon[0].Current, simulate.FormatJSONL, &out); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Current, Desired int
		Action           policy.Action
		Rationale        string
		Rule, Limit      string
		Guard            policy.GuardOutcome
	}
	var sim []row
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var x row
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		sim = append(sim, x)
	}
	if len(sim) != len(daemon) {
		t.Fatalf("simulate wrote %d ticks, the daemon ran %d", len(sim), len(daemon))
	}
	limited := false
	for i, d := range daemon {
		got := row{d.Current, d.Desired, d.Action, d.Rationale, d.Rule, d.Limit, d.Guard}
		if got != sim[i] {
			t.Errorf("tick %d (pending %d):\n daemon   %+v\n simulate %+v", i, pending[i], got, sim[i])
		}
		t.Logf("tick %d: pending %d: %d -> %d %s limit=%q", i, pending[i], d.Current, d.Desired, d.Action, d.Limit)
		limited = limited || d.Limit != ""
		want := map[string]string{}
		if sim[i].Rule != "" {
			want["rule"] = sim[i].Rule
		}
		if sim[i].Limit != "" {
			want["rate_limit"] = sim[i].Limit
		}
		switch sim[i].Guard {
		case policy.GuardBlocked:
			want["host_guard"] = "blocked"
		case policy.GuardForced:
			want["host_guard"] = "emergency"
		}
		have := map[string]string{}
		for _, s := range steps[i] {
			switch s.Name {
			case "rule", "rate_limit", "host_guard":
				have[s.Name] = s.Value
			}
		}
		if fmt.Sprint(have) != fmt.Sprint(want) {
			t.Errorf("tick %d: daemon's explain steps %v, simulate's %v", i, have, want)
		}
	}
	if !limited {
		t.Error("the trace never reached a rate limit: it tests less than it says")
	}
}
