package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

const daemonProm = "[prometheus]\nurl = \"http://127.0.0.1:9090\"\n"

// The HPC platform's two service triggers, translated one for one: up on
// the replicas' CPU with a 60 s cooldown, down on their memory with 300 s,
// against the daemon's [prometheus], in a pool whose source is not
// Prometheus.
const platformRules = `policy = "rules"
[[pools.email.scale_up]]
when = 'promql("rate(container_cpu_usage_seconds_total[1m]) >= bool 0.8")'
cooldown_sec = 60
[pools.email.scale_down]
when = 'promql("(container_memory_usage_bytes / container_memory_limit_bytes) <= bool 0.5")'
cooldown_sec = 300
`

func TestPlatformExamplesLoad(t *testing.T) {
	c, err := load(t, daemonProm+pool(platformRules))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pools["email"]
	want := Scaling{Policy: PolicyRules,
		ScaleUp: []policy.Rule{{When: `promql("rate(container_cpu_usage_seconds_total[1m]) >= bool 0.8")`, Cooldown: 60 * time.Second, Step: 1}},
		ScaleDown: &policy.Rule{When: `promql("(container_memory_usage_bytes / container_memory_limit_bytes) <= bool 0.5")`,
			Cooldown: 300 * time.Second, Step: 1}}
	if !reflect.DeepEqual(p.Scaling, want) {
		t.Errorf("scaling %+v, want %+v", p.Scaling, want)
	}
	if p.Prometheus == nil || p.Prometheus.URL != "http://127.0.0.1:9090" || p.Prometheus.ScrapeInterval != DefaultScrapeInterval {
		t.Errorf("pool's Prometheus %+v, want the daemon's", p.Prometheus)
	}
	rs, err := policy.CompileRules(p.Scaling.ScaleUp, p.Scaling.ScaleDown)
	if err != nil {
		t.Fatal(err)
	}
	if got := rs.Queries(); len(got) != 2 {
		t.Errorf("queries %q, want the two of the platform", got)
	}
}

// Which server a pool's promql() queries.
func TestPromQLServer(t *testing.T) {
	rule := "policy = \"rules\"\n[[pools.email.scale_up]]\nwhen = 'promql(\"up == bool 0\")'\n"
	for _, tc := range []struct {
		name, text string
		daemon     bool // the pool keeps the daemon's [prometheus]
	}{
		{"another source: the daemon's", daemonProm + pool(rule), true},
		{"a prometheus source: its own", daemonProm + strings.Replace(promPool, "%s", "[[pools.email.scale_up]]\nwhen = 'promql(\"up == bool 0\")'\n", 1), false},
		{"no promql(): none", daemonProm + pool(""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if c.Prometheus == nil {
				t.Fatal("no [prometheus]")
			}
			if got := c.Pools["email"].Prometheus != nil; got != tc.daemon {
				t.Errorf("pool keeps the daemon's Prometheus: %t, want %t", got, tc.daemon)
			}
		})
	}
}

func TestPrometheusProblems(t *testing.T) {
	for _, tc := range []struct {
		name, text, key, msg string
	}{
		{"no url", "[prometheus]\nscrape_interval_sec = 15\n" + pool(""), "prometheus.url", "missing"},
		{"scheme", "[prometheus]\nurl = \"redis://x:6379\"\n" + pool(""), "prometheus.url", "scheme"},
		{"password in the url", "[prometheus]\nurl = \"http://u:secret@x:9090\"\n" + pool(""), "prometheus.url", "password"},
		{"unknown key", daemonProm + "pending_query = \"x\"\n" + pool(""), "prometheus.pending_query", "unknown key"},
		{"scrape interval", daemonProm + "scrape_interval_sec = 0\n" + pool(""), "prometheus.scrape_interval_sec", "> 0"},
		{"not a table", "prometheus = \"http://x\"\n" + pool(""), "prometheus", "must be a table"},
		{"range against the daemon's scrape interval", daemonProm + "scrape_interval_sec = 60\n" +
			pool("policy = \"rules\"\n[[pools.email.scale_up]]\nwhen = 'promql(\"rate(x[1m]) > 1\")'\n"),
			"pools.email.scale_up[0].when", "(scrape_interval_sec = 60)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, tc.text, tc.key, tc.msg)
		})
	}
}

// The effective configuration writes [prometheus] back.
func TestPrometheusEffective(t *testing.T) {
	c, err := load(t, daemonProm+"scrape_interval_sec = 30\npassword_file = \"/etc/flexiq-scaled/prom.pw\"\n"+pool(platformRules))
	if err != nil {
		t.Fatal(err)
	}
	again, effective := reloadEffective(t, c)
	if !reflect.DeepEqual(again.Prometheus, c.Prometheus) || !reflect.DeepEqual(again.Pools["email"].Prometheus, c.Prometheus) {
		t.Errorf("written back: %+v, want %+v\n%s", again.Prometheus, c.Prometheus, effective)
	}
}

// The daemon's [prometheus] has its secrets judged as a source's are, and
// a pool that uses it reports its change at a reload.
func TestPrometheusDiff(t *testing.T) {
	c, err := load(t, daemonProm+pool(platformRules))
	if err != nil {
		t.Fatal(err)
	}
	moved, err := load(t, strings.Replace(daemonProm, "127.0.0.1", "10.0.0.2", 1)+pool(platformRules))
	if err != nil {
		t.Fatal(err)
	}
	if got := Diff(c.Pools["email"], moved.Pools["email"]); !reflect.DeepEqual(got, []string{"prometheus"}) {
		t.Errorf("Diff = %q, want [prometheus]", got)
	}
}
