package config

import (
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// A queue pool keeps its default source; a service pool without a source
// table has none, and may say so.
func TestServiceSourceDefault(t *testing.T) {
	for _, tc := range []struct {
		name    string
		service bool
		table   rawSourceTable
		want    string
	}{
		{"queue pool, no table", false, nil, DefaultSourceType},
		{"queue pool, a table without type", false, rawSourceTable{"path": {"/var/lib/q.db"}}, DefaultSourceType},
		{"service pool, no table", true, nil, SourceNone},
		{"service pool, type none", true, rawSourceTable{"type": {SourceNone}}, SourceNone},
		{"service pool with a queue", true, rawSourceTable{"path": {"/var/lib/q.db"}}, DefaultSourceType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoader("/etc/flexiq-scaled/config.toml", MachineIDPath)
			p := defaultPool("svc", time.Second)
			if tc.service {
				p.Service = &Service{}
			}
			l.source(p, tc.table, func(k string) string { return "pools.svc.source." + k })
			// The queue types' own checks (a missing path) are theirs.
			if p.Source.Type != tc.want || (tc.want == SourceNone && len(l.problems) > 0) {
				t.Errorf("source %q, problems %v; want %q", p.Source.Type, l.problems, tc.want)
			}
			if got := p.PolicyParams().NoQueue; got != (tc.want == SourceNone) {
				t.Errorf("NoQueue %t", got)
			}
		})
	}
}

func TestNoQueueChecks(t *testing.T) {
	rules := func(up, down string) func(*Pool) {
		return func(p *Pool) {
			p.Scaling.Policy = PolicyRules
			if up != "" {
				p.Scaling.ScaleUp = []policy.Rule{{When: up, Step: 1}}
			}
			if down != "" {
				p.Scaling.ScaleDown = &policy.Rule{When: down, Step: 1}
			}
		}
	}
	cpu := func(p *Pool) { p.TargetCPUUtilisation = 0.6 }
	for _, tc := range []struct {
		name     string
		service  bool
		set      func(*Pool)
		raw      string // keys of the pool table, TOML
		key, msg string // "" = no problem
	}{
		{"cpu signal", true, cpu, "", "", ""},
		{"rules over promql and the workers", true, rules(`promql("x > 1")`, "worker_cpu < 0.2"), "", "", ""},
		{"fixed size", true, func(p *Pool) { p.MinWorkers, p.MaxWorkers = 3, 3 }, "", "", ""},
		{"queue pool", false, nil, "", "pools.svc.source.type", "only for a service pool"},
		{"no signal", true, nil, "", "pools.svc.target_cpu_utilisation", "CPU signal or on rules"},
		{"cpu from zero", true, func(p *Pool) { cpu(p); p.MinWorkers = 0 }, "", "pools.svc.min_workers", ">= 1"},
		{"cpu from zero with a wake address", true, func(p *Pool) {
			cpu(p)
			p.MinWorkers = 0
			p.Service.Wake = Wake{Listen: "127.0.0.1:18080", Port: "http", Mode: WakeHold, HoldTimeout: time.Minute}
		}, "", "", ""},
		{"a rule over the queue", true, rules("", "pending == 0 && idle_sec > 9"), "", "pools.svc.scale_down.when", "reads pending, idle_sec"},
		{"an up rule over the queue", true, rules("oldest_age > 5", ""), "", "pools.svc.scale_up[0].when", "reads oldest_age"},
		{"latency", true, cpu, "target_queue_latency_sec = 5", "pools.svc.target_queue_latency_sec", "reads the queue"},
		{"keep warm", true, cpu, "keep_warm_workers = 2", "pools.svc.keep_warm_workers", "reads the queue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoader("/etc/flexiq-scaled/config.toml", MachineIDPath)
			p := defaultPool("svc", time.Second)
			p.Source.Type = SourceNone
			if tc.service {
				p.Service = &Service{}
			}
			if tc.set != nil {
				tc.set(p)
			}
			var r rawPool
			if _, err := toml.Decode(tc.raw, &r); err != nil {
				t.Fatal(err)
			}
			l.noQueue(p, &r, func(parts ...string) string { return toml.Key(append([]string{"pools", "svc"}, parts...)).String() })
			if tc.key == "" {
				if len(l.problems) > 0 {
					t.Errorf("problems %v, want none", l.problems)
				}
				return
			}
			for _, pr := range l.problems {
				if pr.Key == tc.key && strings.Contains(pr.Msg, tc.msg) {
					return
				}
			}
			t.Errorf("problems %v, want %s: ...%s...", l.problems, tc.key, tc.msg)
		})
	}
}

// In the file: a pool of queue workers cannot say it has no queue.
func TestQueuePoolWithoutSource(t *testing.T) {
	_, err := load(t, "[pools.email]\napp = \"a:q\"\ntarget_cpu_utilisation = 0.5\n[pools.email.source]\ntype = \"none\"\n")
	if err == nil {
		t.Fatal("loaded")
	}
	for _, p := range problems(t, err) {
		if p.Key == "pools.email.source.type" && strings.Contains(p.Msg, "only for a service pool") {
			return
		}
	}
	t.Errorf("problems %v", err)
}
