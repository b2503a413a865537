package controller

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/snapshot"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// kinds records the journal's events by kind, as the metrics' tap does.
type kinds struct {
	mu  sync.Mutex
	got []eventlog.Kind
}

func (k *kinds) count(kind eventlog.Kind) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, g := range k.got {
		if g == kind {
			n++
		}
	}
	return n
}

// degradedRig is a pool of min workers whose events are tapped.
func degradedRig(t *testing.T, min int) (*rig, *kinds) {
	cfg := testPool("svc")
	cfg.MinWorkers = min
	r := &rig{t: t, sd: newFakeSystemd(), src: &fakeSource{}, clock: &fakeClock{now: monoTime(1000 * time.Hour)},
		log: &syncBuffer{}, cfg: cfg, dir: t.TempDir()}
	k := &kinds{}
	log := eventlog.NewWriter(r.log)
	log.SetTap(func(kind eventlog.Kind, _ eventlog.Fields) {
		k.mu.Lock()
		k.got = append(k.got, kind)
		k.mu.Unlock()
	})
	p, err := NewPool(cfg, r.sd, log, Options{StateDir: r.dir, Clock: r.clock.Now,
		NewSource: func(config.Source) (source.Source, error) { return r.src, nil }})
	if err != nil {
		t.Fatal(err)
	}
	r.pool = p
	r.start(p)
	return r, k
}

// crashes makes unit crash n times, each time as soon as the pool has
// started it again after its backoff.
func (r *rig) crashes(unit string, n int) {
	r.t.Helper()
	back := func() {
		for range 70 {
			if r.sd.count("active") == r.pool.workers.Target {
				return
			}
			r.tick(time.Second)
		}
		r.t.Fatalf("%s not restarted\n%s", unit, r.log)
	}
	for range n {
		back()
		r.sd.set(unit, "failed", "exit-code")
		r.tick(time.Second) // the crash: the slot backs off
	}
	back()
}

// degraded is the state as status, the view and the metrics' report show
// it; they must agree.
func (r *rig) degraded() bool {
	r.t.Helper()
	var rep bool
	r.pool.do(func() {
		rep = snapshot.TickReport(r.pool.facts(r.pool.clock()), policy.Decision{}, 0, r.pool.lastObs).Degraded
	})
	st, v := r.pool.Status(), r.pool.View()
	if st.Degraded != rep || (v.Degraded != nil) != rep || strings.Contains(st.String(), "[degraded]") != rep {
		r.t.Fatalf("status %q (degraded %t), view %+v and report %t disagree", st, st.Degraded, v.Degraded, rep)
	}
	return rep
}

func TestDegradedBaselineCrashLoop(t *testing.T) {
	r, k := degradedRig(t, 2)
	unit := units.UnitName("svc", 2)
	r.crashes(unit, degradedFailures-1)
	if r.degraded() || k.count(eventlog.PoolDegraded) != 0 {
		t.Fatalf("degraded after %d failures in a row, want %d\n%s", degradedFailures-1, degradedFailures, r.log)
	}
	r.sd.set(unit, "failed", "exit-code")
	r.tick(time.Second)
	if !r.degraded() || k.count(eventlog.PoolDegraded) != 1 {
		t.Fatalf("not degraded after %d failures in a row of a baseline worker\n%s", degradedFailures, r.log)
	}
	if v := r.pool.View(); !strings.Contains(v.Degraded.Reason, "1 of 2 baseline workers live; slot 2 failed 3 times in a row") {
		t.Errorf("reason %q", v.Degraded.Reason)
	}
	// The loop goes on: its restarts reach the baseline between crashes,
	// and the state neither flaps nor logs again.
	for range 3 {
		r.crashes(unit, 1)
		if !r.degraded() {
			t.Fatalf("left the degraded state in a crash loop\n%s", r.log)
		}
	}
	for range 2 {
		r.tick(time.Minute)
	}
	if n := r.sd.count("active"); n != 2 {
		t.Fatalf("%d active, want the baseline back", n)
	}
	if k.count(eventlog.PoolDegraded) != 1 || k.count(eventlog.PoolRecovered) != 1 || r.degraded() {
		t.Errorf("after the baseline held: %d degraded and %d recovered entries, degraded %t; want 1, 1, false\n%s",
			k.count(eventlog.PoolDegraded), k.count(eventlog.PoolRecovered), r.degraded(), r.log)
	}
	if len(r.lines("no longer degraded")) != 1 || len(r.lines("degraded: 1 of 2 baseline workers live")) != 1 {
		t.Errorf("journal:\n%s", r.log)
	}
}

// A worker above min_workers is optional capacity: its crash loop is
// replaced with backoff, and the pool is not degraded.
func TestOptionalCapacityFailingIsNotDegraded(t *testing.T) {
	r, k := degradedRig(t, 1)
	r.src.set(30, 0, nil) // 3 workers
	r.tick(time.Second)
	if n := r.sd.count("active"); n != 3 {
		t.Fatalf("%d active, want 3", n)
	}
	r.crashes(units.UnitName("svc", 3), 6)
	if r.degraded() || k.count(eventlog.PoolDegraded) != 0 {
		t.Errorf("degraded by a failing worker above min_workers\n%s", r.log)
	}
}

// Failed starts count as failures: a baseline that never starts is
// degraded, and leaves the state once it has run for a minute.
func TestDegradedFailedStarts(t *testing.T) {
	cfgFail := &units.StartError{JobResult: "failed", Result: "exit-code", ExitStatus: 203}
	r, k := degradedRig(t, 0)
	r.cfg.MinWorkers = 2
	r.sd.failStart = cfgFail
	for range 10 {
		r.tick(time.Second)
	}
	if !r.degraded() {
		t.Fatalf("not degraded with no baseline worker able to start\n%s", r.log)
	}
	if v := r.pool.View(); !strings.Contains(v.Degraded.Reason, "0 of 2 baseline workers live; slot 1, 2 failed") {
		t.Errorf("reason %q", v.Degraded.Reason)
	}
	r.sd.failStart = nil
	for range 4 {
		r.tick(30 * time.Second)
	}
	if r.degraded() || k.count(eventlog.PoolRecovered) != 1 {
		t.Errorf("still degraded a minute after the baseline started\n%s", r.log)
	}
}
