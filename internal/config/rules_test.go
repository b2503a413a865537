package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

const promPool = `[pools.email]
app = "myapp.tasks:queue"
policy = "rules"
%s
[pools.email.source]
type = "prometheus"
url = "http://127.0.0.1:9090"
pending_query = "sum(queue_pending)"
`

func TestScalingLoads(t *testing.T) {
	c, err := load(t, `
[host_guard]
host_cpu_scale_up_max = 0.7
psi_memory_max = 20
mem_available_min = "512M"

[pools.email]
app = "myapp.tasks:queue"
priority = -2
policy = "rules"

[[pools.email.scale_up]]
when = "pending > 0 && host_cpu < 0.65"
cooldown_sec = 90

[[pools.email.scale_up]]
when = "oldest_age > 600"
step = 3

[pools.email.scale_down]
when = "idle_sec >= 300"
cooldown_sec = 90

[pools.email.behavior]
cooldown_sec = 30
[pools.email.behavior.scale_up]
select = "min"
policies = [{ type = "workers", value = 4, period_sec = 15 }, { type = "percent", value = 100, period_sec = 60 }]
[pools.email.behavior.scale_down]
cooldown_sec = 120
policies = [{ type = "workers", value = 1, period_sec = 60 }]

[pools.email.source]
path = "/var/lib/flexiq/flexiq.db"
`)
	if err != nil {
		t.Fatal(err)
	}
	want := Scaling{
		Priority: -2,
		Policy:   PolicyRules,
		ScaleUp: []policy.Rule{
			{When: "pending > 0 && host_cpu < 0.65", Cooldown: 90 * time.Second, Step: 1},
			{When: "oldest_age > 600", Step: 3},
		},
		ScaleDown: &policy.Rule{When: "idle_sec >= 300", Cooldown: 90 * time.Second, Step: 1},
		Behavior: policy.Behavior{
			Cooldown: 30 * time.Second,
			Up: policy.DirectionBehavior{Select: "min", Policies: []policy.RateLimit{
				{Type: "workers", Value: 4, Period: 15 * time.Second}, {Type: "percent", Value: 100, Period: time.Minute}}},
			Down: policy.DirectionBehavior{Select: "max", Cooldown: 2 * time.Minute, Policies: []policy.RateLimit{
				{Type: "workers", Value: 1, Period: time.Minute}}},
		},
	}
	if got := c.Pools["email"].Scaling; !reflect.DeepEqual(got, want) {
		t.Errorf("scaling:\n got %+v\nwant %+v", got, want)
	}
	g := c.HostGuard
	if g == nil || g.CPUScaleUpMax != 0.7 || g.CPUEmergency != 0.88 || g.AlphaUp != 0.5 || g.PSIMemoryMax != 20 ||
		g.MemAvailableMin != 512<<20 || g.EmergencyCooldown != 90*time.Second || g.SampleInterval != 5*time.Second {
		t.Errorf("host guard = %+v", g)
	}

	// The effective config reads back the same.
	again, effective := reloadEffective(t, c)
	if !reflect.DeepEqual(again.Pools["email"].Scaling, c.Pools["email"].Scaling) || !reflect.DeepEqual(again.HostGuard, c.HostGuard) {
		t.Errorf("round trip changed the policy:\n%s\n got %+v %+v", effective, again.Pools["email"].Scaling, again.HostGuard)
	}
}

func TestNoGuardByDefault(t *testing.T) {
	c, err := load(t, pool(""))
	if err != nil {
		t.Fatal(err)
	}
	if c.HostGuard != nil {
		t.Errorf("host guard %+v without a [host_guard] table", c.HostGuard)
	}
	if s := c.Pools["email"].Scaling; s.Policy != PolicyHPA || !reflect.DeepEqual(s.Behavior, policy.Behavior{}) {
		t.Errorf("scaling %+v, want the hpa policy and no behaviour", s)
	}
}

func TestScalingProblems(t *testing.T) {
	tests := []struct {
		name, text string
		key, msg   string
	}{
		{"unknown policy", pool(`policy = "ml"`), "pools.email.policy", `unknown policy "ml"`},
		{"rules without rules", pool(`policy = "rules"`), "pools.email.policy", "needs at least one"},
		{"rules under hpa", pool("[[pools.email.scale_up]]\nwhen = \"true\"\n"), "pools.email.scale_up", `only with policy = "rules"`},
		{"expression error with its position", pool("policy = \"rules\"\n[[pools.email.scale_up]]\nwhen = \"pending >> 1\"\n"),
			"pools.email.scale_up[0].when", "column"},
		{"unknown signal", pool("policy = \"rules\"\n[pools.email.scale_down]\nwhen = \"idle > 5\"\n"),
			"pools.email.scale_down.when", "column 1: unknown name idle"},
		{"not a condition", pool("policy = \"rules\"\n[pools.email.scale_down]\nwhen = \"pending\"\n"),
			"pools.email.scale_down.when", "expected bool"},
		{"missing when", pool("policy = \"rules\"\n[[pools.email.scale_up]]\nstep = 2\n"), "pools.email.scale_up[0].when", "missing"},
		{"bad step", pool("policy = \"rules\"\n[[pools.email.scale_up]]\nwhen = \"true\"\nstep = 0\n"), "pools.email.scale_up[0].step", ">= 1"},
		{"unknown rule key", pool("policy = \"rules\"\n[[pools.email.scale_up]]\nwhen = \"true\"\ncooldown = 9\n"), "pools.email.scale_up[0].cooldown", "unknown key"},
		{"promql needs a prometheus source", pool("policy = \"rules\"\n[[pools.email.scale_up]]\nwhen = 'promql(\"up\")'\n"),
			"pools.email.scale_up[0].when", `promql() needs a Prometheus server: set the daemon-level [prometheus] table, or make the pool's source type = "prometheus"`},
		{"range shorter than two scrapes", strings.Replace(promPool, "%s", "[[pools.email.scale_up]]\nwhen = 'promql(\"rate(jobs_total[20s]) > 1\")'\n", 1),
			"pools.email.scale_up[0].when", "range [20s] read by rate() is shorter than twice the scrape interval (scrape_interval_sec = 15)"},
		{"range against the source's scrape interval", strings.Replace(promPool, "%s", "[[pools.email.scale_up]]\nwhen = 'promql(\"increase(jobs_total[1m]) > 1\")'\n", 1) + "scrape_interval_sec = 60\n",
			"pools.email.scale_up[0].when", "range [1m] read by increase() is shorter than twice the scrape interval (scrape_interval_sec = 60)"},
		{"unbalanced query", strings.Replace(promPool, "%s", "[[pools.email.scale_up]]\nwhen = 'promql(\"sum(rate(x[5m])\")'\n", 1),
			"pools.email.scale_up[0].when", "unbalanced '('"},
		{"bad behaviour policy", pool("[pools.email.behavior.scale_up]\npolicies = [{ type = \"pods\", value = 0, period_sec = 15 }]\n"),
			"pools.email.behavior.scale_up.policies[0].type", `unknown "pods"`},
		{"bad select", pool("[pools.email.behavior.scale_down]\nselect = \"most\"\n"), "pools.email.behavior.scale_down.select", `unknown "most"`},
		{"behaviour typo", pool("[pools.email.behavior]\ncooldown = 90\n"), "pools.email.behavior.cooldown", "unknown key"},
		{"guard threshold", "[host_guard]\nhost_cpu_scale_up_max = 65\n" + pool(""), "host_guard.host_cpu_scale_up_max", "(0, 1]"},
		{"guard order", "[host_guard]\nhost_cpu_scale_up_max = 0.9\nhost_cpu_emergency = 0.8\n" + pool(""), "host_guard.host_cpu_emergency", ">= host_cpu_scale_up_max"},
		{"guard memory", "[host_guard]\nmem_available_min = \"lots\"\n" + pool(""), "host_guard.mem_available_min", "byte count"},
		{"guard typo", "[host_guard]\nhost_cpu_emergncy = 0.9\n" + pool(""), "host_guard.host_cpu_emergncy", "did you mean"},
		{"pool key typo", pool("priorty = 1"), "pools.email.priorty", `did you mean "priority"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblem(t, tt.text, tt.key, tt.msg)
		})
	}
}

func TestCheckRanges(t *testing.T) {
	for _, tt := range []struct {
		q    string
		ok   bool
		want string
	}{
		{"sum(queue_pending)", true, ""},
		{"rate(x[30s])", true, ""},
		{"rate(x[29s])", false, "read by rate()"},
		{"sum(increase(x{job=\"a[1s]\"}[1h30m]))", true, ""},
		{"max_over_time(rate(x[1m])[10m:15s])", true, ""},
		{"max_over_time(rate(x[1m])[20s:5s])", false, "[20s:5s] read by max_over_time()"},
		{"rate(x[300])", true, ""},
		{"rate(x[5x])", false, "not a duration"},
		{"rate(x[5m]", false, "unbalanced '('"},
		{"x]", false, "unbalanced ']'"},
		{`x{a="b`, false, "unterminated string"},
	} {
		err := checkRanges(tt.q, 15*time.Second)
		if (err == nil) != tt.ok || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("checkRanges(%q) = %v, want ok=%t %q", tt.q, err, tt.ok, tt.want)
		}
	}
}
