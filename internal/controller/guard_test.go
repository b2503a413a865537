package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/hostload"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// fakeHost is the host as the guard reads it.
type fakeHost struct {
	mu sync.Mutex
	r  hostload.Reading
}

func (h *fakeHost) read() hostload.Reading {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.r
}

func (h *fakeHost) cpu(v float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.r.CPU, h.r.CPUKnown = v, true
	h.r.PSIErr = errors.New("open /proc/pressure/cpu: no such file or directory")
}

// guardedRig makes a pool on r's fakes with the shared guard g.
func guardedRig(t *testing.T, cfg *config.Pool, g testGuard, clock *fakeClock) *rig {
	r := &rig{t: t, sd: newFakeSystemd(), src: &fakeSource{}, clock: clock, log: &syncBuffer{}, cfg: cfg, dir: t.TempDir()}
	p, err := NewPool(cfg, r.sd, g.log, Options{
		StateDir: r.dir, Clock: clock.Now, Guard: g.HostGuard,
		NewSource: func(config.Source) (source.Source, error) { return r.src, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.pool = p
	r.sd.stopNow = true
	return r
}

type testGuard struct {
	*HostGuard
	log    *eventlog.Logger
	logBuf *strings.Builder
}

func newTestGuard(cfg *config.HostGuard, h *fakeHost) testGuard {
	buf := &strings.Builder{}
	log := eventlog.NewWriter(&lockedWriter{w: buf})
	return testGuard{HostGuard: NewHostGuard(cfg, log, h.read), log: log, logBuf: buf}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func guardConfig() *config.HostGuard {
	return &config.HostGuard{GuardParams: policy.DefaultGuardParams(), SampleInterval: time.Second}
}

// twoGuardedPools starts pools "low" (priority 0) and "high" (priority 5)
// under one guard, on a host at 0.2 CPU, with hour-long down windows, and
// ticks them once on backlogs that ask for 4 and 3 workers.
func twoGuardedPools(t *testing.T) (host *fakeHost, g testGuard, low, high *rig, tickBoth func(time.Duration)) {
	host = &fakeHost{}
	host.cpu(0.2)
	g = newTestGuard(guardConfig(), host)
	clock := &fakeClock{now: monoTime(1000 * time.Hour)}
	lowCfg, highCfg := testPool("low"), testPool("high")
	lowCfg.ScaleDownWindow, highCfg.ScaleDownWindow = time.Hour, time.Hour
	highCfg.Scaling.Priority = 5
	low, high = guardedRig(t, lowCfg, g, clock), guardedRig(t, highCfg, g, clock)
	ctx := context.Background()
	low.start(low.pool)
	high.start(high.pool)
	tickBoth = func(after time.Duration) {
		clock.advance(after)
		low.pool.Tick(ctx)
		high.pool.Tick(ctx)
	}
	low.src.set(40, 0, nil)
	high.src.set(30, 0, nil)
	tickBoth(time.Second)
	return host, g, low, high, tickBoth
}

func TestHostGuardBlocksThenForcesByPriority(t *testing.T) {
	host, g, low, high, tickBoth := twoGuardedPools(t)
	if a, b := low.sd.count("active"), high.sd.count("active"); a != 4 || b != 3 {
		t.Fatalf("with headroom: %d and %d workers, want 4 and 3", a, b)
	}

	// No headroom: the backlog grows, the pools do not.
	host.cpu(0.7)
	low.src.set(80, 0, nil)
	high.src.set(80, 0, nil)
	tickBoth(time.Second)
	tickBoth(time.Second)
	if a, b := low.sd.count("active"), high.sd.count("active"); a != 4 || b != 3 {
		t.Fatalf("without headroom: %d and %d workers, want 4 and 3 held\n%s", a, b, g.logBuf)
	}
	if n := len(g.logLines("host guard holds scale-up 4 -> 8 at 4", "host_cpu=0.70")); n != 1 {
		t.Errorf("%d block entries for the low pool, want 1 (logged once, with the readings)\n%s", n, g.logBuf)
	}
	if n := len(g.logLines("no pressure stall information")); n != 1 {
		t.Errorf("%d entries about the missing PSI, want 1", n)
	}

	// Saturated: the low-priority pool gives up one worker per cooldown,
	// the other none; neither scales up.
	host.cpu(0.95)
	tickBoth(time.Second)
	if a, b := low.sd.count("active"), high.sd.count("active"); a != 3 || b != 3 {
		t.Fatalf("first emergency: %d and %d, want 3 and 3\n%s", a, b, g.logBuf)
	}
	tickBoth(30 * time.Second)
	if a := low.sd.count("active"); a != 3 {
		t.Fatalf("within the emergency cooldown: %d, want still 3", a)
	}
	tickBoth(60 * time.Second)
	if a := low.sd.count("active"); a != 2 {
		t.Fatalf("after the emergency cooldown: %d, want 2", a)
	}
	if n := len(g.logLines("host guard emergency: draining one worker", "pool=low", "host_cpu=0.95")); n != 2 {
		t.Errorf("%d emergency entries, want 2\n%s", n, g.logBuf)
	}
	// Priorities honoured: low goes to its minimum first.
	tickBoth(90 * time.Second)
	if a, b := low.sd.count("active"), high.sd.count("active"); a != 1 || b != 3 {
		t.Fatalf("low at its minimum: %d and %d, want 1 and 3", a, b)
	}
	tickBoth(90 * time.Second)
	if a, b := low.sd.count("active"), high.sd.count("active"); a != 1 || b != 2 {
		t.Fatalf("then the high pool: %d and %d, want 1 and 2", a, b)
	}
}

func (g testGuard) logLines(subs ...string) []string {
	log := &syncBuffer{}
	log.Write([]byte(g.logBuf.String()))
	return (&rig{log: log}).lines(subs...)
}

func TestNoGuardConfiguredChangesNothing(t *testing.T) {
	host := &fakeHost{}
	host.cpu(0.99)
	g := newTestGuard(nil, host)
	clock := &fakeClock{now: monoTime(1000 * time.Hour)}
	r := guardedRig(t, testPool("work"), g, clock)
	r.start(r.pool)
	r.src.set(50, 0, nil)
	clock.advance(time.Second)
	r.pool.Tick(context.Background())
	if n := r.sd.count("active"); n != 5 {
		t.Errorf("%d workers on a saturated host without [host_guard], want 5 as ever", n)
	}
}

func TestRateLimitSurvivesARestart(t *testing.T) {
	cfg := testPool("work")
	cfg.ScaleDownWindow = 0
	cfg.Scaling.Behavior = policy.Behavior{Down: policy.DirectionBehavior{Select: policy.SelectMax,
		Policies: []policy.RateLimit{{Type: policy.LimitWorkers, Value: 1, Period: time.Minute}}}}
	r := newRig(t, cfg)
	r.sd.stopNow = true
	r.start(r.pool)
	r.src.set(80, 0, nil)
	r.tick(time.Second)
	// As in the HPA, a period's start count is the current one less what
	// was added in it: within the minute of the burst, the scale-down
	// could undo it. A minute on, one worker per minute.
	r.tick(60 * time.Second)
	r.src.set(0, 0, nil)
	r.tick(time.Second)
	if n := r.sd.count("active"); n != 7 {
		t.Fatalf("%d active after the first scale-down, want 7 (one per minute)", n)
	}
	if len(r.lines("FLEXIQ_LIMIT=\"scale_down rate limit: 7\"")) != 1 {
		t.Errorf("the decision does not say which limit held:\n%s", r.log)
	}

	r.clock.advance(5 * time.Second)
	r.pool = r.newPool()
	r.start(r.pool)
	r.tick(10 * time.Second)
	if n := r.sd.count("active"); n != 7 {
		t.Fatalf("after the restart: %d active, want 7: the minute is not over\n%s", n, r.log)
	}
	r.tick(50 * time.Second)
	if n := r.sd.count("active"); n != 6 {
		t.Fatalf("a minute after: %d active, want 6", n)
	}
}

// querySource is a prometheus-like source whose conditions the test sets.
type querySource struct {
	fakeSource
	mu      sync.Mutex
	results map[string]source.ConditionResult
}

func (q *querySource) Conditions(ctx context.Context, queries []string) map[string]source.ConditionResult {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[string]source.ConditionResult{}
	for _, s := range queries {
		r, ok := q.results[s]
		if !ok {
			r.Err = errors.New("no such query")
		}
		out[s] = r
	}
	return out
}

func TestRulesPool(t *testing.T) {
	cfg := testPool("work")
	cfg.Scaling.Policy = config.PolicyRules
	cfg.Scaling.ScaleUp = []policy.Rule{{When: `promql("sum(rate(jobs_total[1m])) > 5")`, Cooldown: 90 * time.Second, Step: 2}}
	cfg.Scaling.ScaleDown = &policy.Rule{When: `idle_sec >= 120`, Cooldown: 90 * time.Second, Step: 1}
	r := newRig(t, cfg)
	qs := &querySource{results: map[string]source.ConditionResult{}}
	r.pool.src = qs
	r.sd.stopNow = true
	r.start(r.pool)
	set := func(fires bool, err error) {
		qs.mu.Lock()
		qs.results["sum(rate(jobs_total[1m])) > 5"] = source.ConditionResult{Fires: fires, Err: err}
		qs.mu.Unlock()
	}

	qs.set(3, 0, nil)
	set(true, nil)
	r.tick(time.Second)
	if n := r.sd.count("active"); n != 3 {
		t.Fatalf("%d active after the rule fired, want 1+2", n)
	}
	if len(r.lines(`FLEXIQ_RULE="scale_up[0]"`, "workers=1 -> 3")) != 1 {
		t.Errorf("the decision does not name its rule:\n%s", r.log)
	}
	r.tick(30 * time.Second)
	if n := r.sd.count("active"); n != 3 {
		t.Fatalf("%d active within the rule's cooldown, want 3", n)
	}
	set(false, errors.New("connection refused"))
	r.tick(60 * time.Second)
	if n := r.sd.count("active"); n != 3 {
		t.Fatalf("%d active on a failed query, want a hold at 3", n)
	}
	if len(r.lines("rule scale_up[0]", "connection refused", "holding at 3")) != 1 {
		t.Errorf("the failed rule is not in the journal:\n%s", r.log)
	}
	set(false, nil)
	qs.set(0, 0, nil)
	r.tick(time.Second)
	r.tick(125 * time.Second)
	if n := r.sd.count("active"); n != 2 {
		t.Fatalf("%d active after 120 s idle, want 2\n%s", n, r.log)
	}
}

// A pool the operator paused, or one in dry-run, cannot give up a worker:
// the emergency falls to the next pool instead of being spent on it.
func TestHostGuardEmergencySkipsHeldPools(t *testing.T) {
	for _, held := range []string{"paused", "dry-run"} {
		t.Run(held, func(t *testing.T) {
			host, g, low, high, tickBoth := twoGuardedPools(t)
			switch held {
			case "paused":
				if _, err := low.pool.SetOverride(api.Override{Kind: api.OverridePaused, By: "test"}); err != nil {
					t.Fatal(err)
				}
			case "dry-run":
				c := *low.cfg
				c.Mode = config.ModeDryRun
				if err := low.pool.Update(&c); err != nil {
					t.Fatal(err)
				}
			}
			host.cpu(0.95)
			tickBoth(time.Second)
			if a, b := low.sd.count("active"), high.sd.count("active"); a != 4 || b != 2 {
				t.Fatalf("emergency with the low pool %s: %d and %d workers, want 4 and 2\n%s", held, a, b, g.logBuf)
			}
		})
	}
}
