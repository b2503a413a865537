package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/snapshot"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// fakePromQL is the daemon's [prometheus], its conditions set by the test.
type fakePromQL struct {
	querySource
	url    string
	closed bool
}

func (f *fakePromQL) Close() error { f.closed = true; return nil }

// promQLRig is a pool whose queue source runs no PromQL and whose rules
// query the daemon's [prometheus]: the platform's two triggers.
func promQLRig(t *testing.T, edit ...func(*config.Pool)) (*rig, *[]*fakePromQL) {
	cfg := testPool("svc")
	cfg.Scaling.Policy = config.PolicyRules
	cfg.Scaling.ScaleUp = []policy.Rule{{When: `promql("rate(container_cpu_usage_seconds_total[1m]) >= bool 0.8")`, Cooldown: 60 * time.Second, Step: 1}}
	cfg.Scaling.ScaleDown = &policy.Rule{When: `promql("(container_memory_usage_bytes / container_memory_limit_bytes) <= bool 0.5")`, Cooldown: 300 * time.Second, Step: 1}
	cfg.Prometheus = &config.Prometheus{Conn: config.Conn{URL: "http://a:9090"}}
	for _, e := range edit {
		e(cfg)
	}
	r := &rig{t: t, sd: newFakeSystemd(), src: &fakeSource{}, clock: &fakeClock{now: monoTime(1000 * time.Hour)}, log: &syncBuffer{}, cfg: cfg, dir: t.TempDir()}
	opened := &[]*fakePromQL{}
	p, err := NewPool(cfg, r.sd, eventlog.NewWriter(r.log), Options{
		StateDir: r.dir, Clock: r.clock.Now,
		NewSource: func(config.Source) (source.Source, error) { return r.src, nil },
		NewPromQL: func(c config.Prometheus) source.PromQL {
			f := &fakePromQL{url: c.URL}
			f.results = map[string]source.ConditionResult{}
			*opened = append(*opened, f)
			return f
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.pool = p
	r.sd.stopNow = true
	return r, opened
}

const (
	cpuHigh = "rate(container_cpu_usage_seconds_total[1m]) >= bool 0.8"
	memLow  = "(container_memory_usage_bytes / container_memory_limit_bytes) <= bool 0.5"
)

func (f *fakePromQL) set(q string, fires bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results[q] = source.ConditionResult{Fires: fires, Err: err}
}

func TestDaemonPrometheusRules(t *testing.T) {
	r, opened := promQLRig(t)
	defer r.pool.Close()
	if len(*opened) != 1 {
		t.Fatalf("%d servers opened, want the daemon's", len(*opened))
	}
	prom := (*opened)[0]
	r.start(r.pool)

	steps := []struct {
		name           string
		after          time.Duration
		cpu, mem       bool
		cpuErr, memErr error
		want           int
	}{
		{"cpu high: up", time.Second, true, false, nil, nil, 2},
		{"within the 60 s cooldown", 30 * time.Second, true, false, nil, nil, 2},
		{"after it", 31 * time.Second, true, false, nil, nil, 3},
		{"memory low: down", time.Second, false, true, nil, nil, 2},
		{"within the 300 s cooldown", 100 * time.Second, false, true, nil, nil, 2},
		{"server down: hold, never down", 300 * time.Second, false, false, errors.New("connection refused"), errors.New("connection refused"), 2},
		{"memory query fails: hold", time.Second, false, false, nil, errors.New("NaN"), 2},
		{"back: down", time.Second, false, true, nil, nil, 1},
	}
	for _, s := range steps {
		prom.set(cpuHigh, s.cpu, s.cpuErr)
		prom.set(memLow, s.mem, s.memErr)
		r.tick(s.after)
		if n := r.sd.count("active"); n != s.want {
			t.Fatalf("%s: %d active, want %d\n%s", s.name, n, s.want, r.log)
		}
	}
	if len(r.lines("connection refused", "holding at 2")) == 0 {
		t.Errorf("the failed promql() is not in the journal:\n%s", r.log)
	}

	// A reload that changes the server reopens it; one that does not
	// keeps it.
	same := *r.cfg
	if err := r.pool.Update(&same); err != nil {
		t.Fatal(err)
	}
	moved := *r.cfg
	moved.Prometheus = &config.Prometheus{Conn: config.Conn{URL: "http://b:9090"}}
	if err := r.pool.Update(&moved); err != nil {
		t.Fatal(err)
	}
	if len(*opened) != 2 || !prom.closed || (*opened)[1].url != "http://b:9090" {
		t.Errorf("after the reloads: %d opened, old closed %t, want the new server opened and the old closed", len(*opened), prom.closed)
	}
}

// A prometheus source keeps querying its own server, whatever the daemon
// has.
func TestPrometheusSourceQueriesItself(t *testing.T) {
	r, opened := promQLRig(t)
	defer r.pool.Close()
	own := &querySource{results: map[string]source.ConditionResult{cpuHigh: {Fires: true}, memLow: {}}}
	r.pool.src = own
	(*opened)[0].set(cpuHigh, false, errors.New("the daemon's server was asked"))
	r.start(r.pool)
	r.tick(time.Second)
	if n := r.sd.count("active"); n != 2 {
		t.Fatalf("%d active, want 2: the source's own server fires\n%s", n, r.log)
	}
}

// A service pool with no queue source: its rules decide, the empty counts
// of its none source never show as a queue, and a tick without a rule
// result holds.
func TestServicePoolWithoutQueue(t *testing.T) {
	r, opened := promQLRig(t, func(c *config.Pool) {
		c.Service = &config.Service{}
		c.Source = config.Source{Type: config.SourceNone}
	})
	defer r.pool.Close()
	src, err := source.New(r.cfg.Source)
	if err != nil {
		t.Fatal(err)
	}
	r.pool.src = src
	prom := (*opened)[0]
	r.start(r.pool)
	for _, s := range []struct {
		name     string
		cpu, mem bool
		err      error
		want     int
	}{
		{"no result yet: hold", false, false, errors.New("no such query"), 1},
		{"cpu: up", true, false, nil, 2},
		{"nothing fires: stable, no empty queue to scale down on", false, false, nil, 2},
		{"memory low: down", false, true, nil, 1},
	} {
		prom.set(cpuHigh, s.cpu, s.err)
		prom.set(memLow, s.mem, s.err)
		r.tick(301 * time.Second)
		if n := r.sd.count("active"); n != s.want {
			t.Fatalf("%s: %d active, want %d\n%s", s.name, n, s.want, r.log)
		}
	}
	st, v := r.pool.Status(), r.pool.View()
	var rep api.TickReport
	r.pool.do(func() { rep = snapshot.TickReport(r.pool.facts(r.pool.clock()), policy.Decision{}, 0, r.pool.lastObs) })
	if !strings.Contains(st.String(), "no queue") || v.Queue != nil || rep.Queue != nil || v.Source.Type != "none" {
		t.Errorf("status %q, view queue %+v, report queue %+v, source %q: want no queue shown", st, v.Queue, rep.Queue, v.Source.Type)
	}
}
