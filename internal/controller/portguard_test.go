package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/workers"
	"github.com/flexiq/flexiq-scaled/internal/probe"
	"github.com/flexiq/flexiq-scaled/internal/slots"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// A squatter on a replica's auto port, which answers its probe: the
// replica never enters discovery, the journal names the port, uid and PID
// once, and after ready_timeout_sec the replacement gets another port,
// which, its own, is published.
func TestPortGuardSquattedAutoPort(t *testing.T) {
	sr := newServiceRig(t, config.ReadyHTTP, 0)
	sr.start(sr.pool)
	u := units.UnitName("web", 1)
	port := sr.pool.workers.Slots.Live[1].Ports()["http"]
	sr.owners.running(u)
	sr.owners.listen("/system.slice/squat.service", port, 65534, 4242)
	sr.prober.send(t, u, probe.Ready, sr.clock.now)
	sr.pump()
	sr.settle()
	for range 3 {
		sr.pool.do(func() { sr.pool.workers.Svc.GuardRound(sr.clock.now) })
	}
	if got := sr.published(); len(got) != 0 {
		t.Fatalf("published %v with a squatter on %d:\n%s", got, port, sr.log)
	}
	held := sr.lines(fmt.Sprintf("port %d is held by another listener", port), `FLEXIQ_HOLDER_UID="65534"`, `FLEXIQ_HOLDER_PID="4242"`)
	if len(held) != 1 {
		t.Fatalf("%d journal entries naming port %d, uid and PID, want one:\n%s", len(held), port, sr.log)
	}
	sr.tick(5 * time.Minute)
	if !slices.Equal(sr.sd.stops, []string{u}) {
		t.Fatalf("stops %v, want %s replaced after ready_timeout_sec", sr.sd.stops, u)
	}
	var w2 *workers.Worker
	for range 10 {
		sr.tick(10 * time.Second)
		for _, w := range sr.pool.workers.Slots.Live {
			w2 = w
		}
		if w2 != nil {
			break
		}
	}
	if w2 == nil {
		t.Fatal("no replacement")
	}
	if w2.Ports()["http"] == port {
		t.Fatalf("the replacement got the squatted port %d again", port)
	}
	sr.owners.replica(w2.Unit(), w2.Ports()["http"])
	sr.prober.send(t, w2.Unit(), probe.Ready, sr.clock.now)
	sr.pump()
	if got := sr.published(); !slices.Equal(got, []string{w2.Unit()}) {
		t.Fatalf("published %v, want the replacement on its own port", got)
	}
}

// active and notify readiness are held back too; a ready replica whose
// port gains a foreign listener (another address of it) leaves discovery
// at the next round, and returns once it is gone.
func TestPortGuardActiveReadiness(t *testing.T) {
	sr := newServiceRig(t, config.ReadyActive, 0)
	sr.start(sr.pool)
	sr.settle()
	w := sr.pool.workers.Slots.Live[1]
	port := w.Ports()["http"]
	sr.owners.replica(w.Unit(), port)
	sr.pool.do(func() { sr.pool.workers.Svc.GuardRound(sr.clock.now) })
	sr.pump()
	sr.settle()
	if got := sr.published(); !slices.Equal(got, []string{w.Unit()}) {
		t.Fatalf("published %v, want %s on its own port", got, w.Unit())
	}
	sr.owners.listen("/user.slice/user-1000.slice/session-1.scope", port, 1000, 777)
	sr.clock.advance(time.Second)
	sr.pool.do(func() { sr.pool.workers.Svc.GuardRound(sr.clock.now) })
	sr.pump()
	sr.settle()
	if got := sr.published(); len(got) != 0 {
		t.Fatalf("published %v with a second listener on %d", got, port)
	}
	sr.owners.closePort(port)
	sr.owners.replica(w.Unit(), port)
	sr.clock.advance(time.Second)
	sr.pool.do(func() { sr.pool.workers.Svc.GuardRound(sr.clock.now) })
	sr.pump()
	sr.settle()
	if got := sr.published(); !slices.Equal(got, []string{w.Unit()}) {
		t.Fatalf("published %v once the squatter left, want %s", got, w.Unit())
	}
}

// A fixed port held before the pool starts: its slot gets no replica, the
// pool starts in the next slot, and the journal says why once.
func TestPortGuardFixedPortSkipsSlot(t *testing.T) {
	const base = 39400
	sr := newServiceRig(t, config.ReadyActive, base)
	sr.owners.listen("/system.slice/squat.service", base, 65534, 4242)
	sr.start(sr.pool)
	sr.tick(time.Second)
	if sr.pool.workers.Slots.Live[1] != nil || sr.pool.workers.Slots.Live[2] == nil {
		t.Fatalf("live slots %v, want slot 2 and not slot 1", slots.SortedKeys(sr.pool.workers.Slots.Live))
	}
	if n := len(sr.lines(fmt.Sprintf("port %d is held", base), "slot 1", `FLEXIQ_HOLDER_PID="4242"`)); n != 1 {
		t.Fatalf("%d journal entries for the held fixed port, want one:\n%s", n, sr.log)
	}
}
