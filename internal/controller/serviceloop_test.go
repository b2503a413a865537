package controller

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/probe"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Service pools in the running loop, and across a rollout and a removal.

// The loop answers the operator while an after-change command hangs.
func TestServiceLoopAnswersWhileCommandHangs(t *testing.T) {
	sr := newServiceRig(t, config.ReadyActive, 0)
	sr.runner.hold = make(chan struct{})
	defer close(sr.runner.hold)
	sr.start(sr.pool) // publishes slot 1: its command hangs
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sr.pool.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(10 * time.Second); sr.runner.runs() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the after-change command never ran")
		}
	}
	answered := make(chan struct{})
	go func() {
		sr.pool.Roll("test")
		close(answered)
	}()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the operator's call waited for the after-change command")
	}
	if sr.runner.runs() != 1 {
		t.Fatalf("%d commands ran, want the one that hangs", sr.runner.runs())
	}
}

// A failed after-change command is a warning, and is retried at the
// next publish.
func TestServiceCommandFailureRetried(t *testing.T) {
	sr := newServiceRig(t, config.ReadyActive, 0)
	sr.runner.fail = context.DeadlineExceeded
	sr.start(sr.pool)
	sr.settle()
	if len(sr.lines("after-change command", "failed", "WARNING")) == 0 && len(sr.lines("after-change command", "failed")) == 0 {
		t.Fatalf("no warning for the failed command:\n%s", sr.log)
	}
	sr.runner.fail = nil
	sr.pool.do(func() {
		sr.pool.workers.Svc.Pubs.Dirty = true
		sr.pool.workers.Svc.PublishReady(context.Background(), sr.clock.now)
	})
	sr.settle()
	if sr.runner.runs() != 2 || !strings.Contains(sr.log.String(), "done in") {
		t.Fatalf("the command ran %d times; journal:\n%s", sr.runner.runs(), sr.log)
	}
}

// A failing after-change command is retried at the next change of the
// ready set, not at every publish that finds the same set: calls that come
// while it runs (probe results, ticks, the loop's own) must not rerun it
// as fast as it fails, one transient unit after another.
func TestServiceFailingCommandWaitsForAChange(t *testing.T) {
	sr := newServiceRig(t, config.ReadyActive, 0)
	sr.runner.fail = context.DeadlineExceeded
	sr.runner.hold = make(chan struct{})
	sr.start(sr.pool) // publishes slot 1: its command waits
	for deadline := time.Now().Add(10 * time.Second); sr.runner.runs() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the after-change command never ran")
		}
	}
	publishTimes := func(n int) {
		for range n {
			sr.pool.do(func() { sr.pool.workers.Svc.PublishReady(context.Background(), sr.clock.now) })
		}
	}
	publishTimes(5) // the same set, while the command runs
	close(sr.runner.hold)
	sr.settle()
	publishTimes(5) // the same set, after it failed
	sr.settle()
	if n := sr.runner.runs(); n != 1 {
		t.Fatalf("the failing command ran %d times with the set unchanged, want once; journal:\n%s", n, sr.log)
	}
	// A change still reruns it: TestServiceCommandFailureRetried.
}

// A reload that gives a pool its first port guards its listeners from
// then on (a squatter on the new port must not be published), and one
// that takes its last port away stops the checks.
func TestReloadAddingPortsGuardsThem(t *testing.T) {
	sr := newServiceRig(t, config.ReadyActive, 0)
	ports := sr.cfg.Service.Ports
	svc := *sr.cfg.Service
	svc.Ports, svc.MetricsPort = nil, ""
	sr.cfg.Service = &svc
	sr.pool.Close()
	sr.pool = sr.newPool()
	defer sr.pool.Close()
	sr.start(sr.pool)
	guarded := func() (g bool) {
		sr.pool.do(func() { g = sr.pool.workers.Svc.Guard != nil })
		return g
	}
	if guarded() {
		t.Fatal("a pool with no ports has a port guard")
	}
	update := func(ports []config.Port) {
		cfg := *sr.cfg
		s := *cfg.Service
		s.Ports = ports
		cfg.Service = &s
		if err := sr.pool.Update(&cfg); err != nil {
			t.Fatal(err)
		}
	}
	update(ports)
	if !guarded() {
		t.Error("a reload added a port and nothing guards it")
	}
	update(nil)
	if guarded() {
		t.Error("a reload removed the last port and the guard stays")
	}
}

// The real prober, in the pool's loop: a replica whose port accepts
// connections enters discovery without a tick.
func TestServiceProbeThroughTheLoop(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	sr := newServiceRig(t, config.ReadyTCP, l.Addr().(*net.TCPAddr).Port)
	sr.tweak = func(o *Options) { o.Commands = sr.runner; o.PortOwners = sr.owners.dump } // probe.New
	sr.pool = sr.newPool()
	defer sr.pool.Close()
	sr.start(sr.pool)
	// The test's listener is the replica's, as its cgroup would say once
	// it has started (before, a listener on its fixed port is another's).
	sr.owners.replica(units.UnitName("web", 1), l.Addr().(*net.TCPAddr).Port)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sr.pool.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	u := units.UnitName("web", 1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(sr.disc, "web.json"))
		// The status follows the file by the time it takes to build it.
		v := sr.pool.View()
		if slices.Equal(unitsIn(string(b)), []string{u}) && v.Workers.Ready != nil && *v.Workers.Ready == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never entered discovery (status %+v); the file:\n%s\n%s", u, v.Workers, b, sr.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A rollout of a service pool retires an old replica only once a new one
// is ready, so the ready count never drops below the target.
func TestServiceRolloutWaitsForReady(t *testing.T) {
	sr := newServiceRig(t, config.ReadyTCP, 0)
	sr.start(sr.pool)
	u1 := units.UnitName("web", 1)
	sr.prober.send(t, u1, probe.Ready, sr.clock.now)
	sr.pump()
	sr.settle()
	cfg := *sr.cfg
	cfg.Exec = []string{"/bin/worker", "--v2"}
	if err := sr.pool.Update(&cfg); err != nil {
		t.Fatal(err)
	}
	sr.tick(time.Second)
	sr.settle()
	u2 := units.UnitName("web", 2)
	if sr.pool.workers.Slots.Live[2] == nil || len(sr.sd.stops) != 0 || sr.pool.workers.Draining() != 0 {
		t.Fatalf("want the surge replica started and the old one kept: live %d, draining %d", sr.pool.workers.Live(), sr.pool.workers.Draining())
	}
	sr.tick(time.Second)
	if sr.pool.workers.Draining() != 0 {
		t.Fatal("the old replica left before the new one was ready")
	}
	sr.prober.send(t, u2, probe.Ready, sr.clock.now)
	sr.pump()
	sr.settle()
	sr.tick(time.Second)
	sr.settle()
	if got := sr.published(); !slices.Equal(got, []string{u2}) {
		t.Fatalf("discovery lists %v, want the new replica alone", got)
	}
	sr.tick(31 * time.Second)
	if !slices.Equal(sr.sd.stops, []string{u1}) {
		t.Fatalf("stops %v, want the old replica after its drain period", sr.sd.stops)
	}
}

// Removing a service pool takes its replicas out of discovery first, and
// stops them after their drain period.
func TestServicePoolRemovalDrains(t *testing.T) {
	sr := newServiceRig(t, config.ReadyActive, 0)
	sr.src.set(20, 0, nil)
	sr.start(sr.pool)
	sr.tick(time.Second)
	sr.settle()
	step := func() (done bool) {
		sr.pool.do(func() {
			sr.pool.workers.Stopping = true
			done, _ = sr.pool.drainStep(context.Background(), "pool removed")
		})
		return done
	}
	step()
	if got := sr.published(); len(got) != 0 {
		t.Fatalf("discovery lists %v once the pool is removed", got)
	}
	sr.settle()
	sr.clock.advance(29 * time.Second)
	if step() || len(sr.sd.stops) != 0 {
		t.Fatalf("stopped %v within the drain period", sr.sd.stops)
	}
	sr.clock.advance(2 * time.Second)
	step()
	if len(sr.sd.stops) != 2 {
		t.Fatalf("stops %v after the drain period, want both replicas", sr.sd.stops)
	}
}

// A Type=notify replica enters discovery soon after it becomes active,
// without waiting for the pool's next tick.
func TestServiceNotifyWithoutATick(t *testing.T) {
	sr := newServiceRig(t, config.ReadyNotify, 0)
	sr.cfg.PollInterval = time.Hour
	sr.pool = sr.newPool()
	sr.start(sr.pool)
	u := units.UnitName("web", 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sr.pool.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	sr.sd.set(u, "active", "success")
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(sr.disc, "web.json"))
		if slices.Equal(unitsIn(string(b)), []string{u}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never entered discovery; the file:\n%s", u, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
