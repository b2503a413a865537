package controller

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/capacity"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/workers"
	"github.com/flexiq/flexiq-scaled/internal/cpuset"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// seqPorts picks ports from 40000 up, as a kernel with nothing else
// listening would.
type seqPorts struct {
	next   *int
	closed *int
	err    error
}

func (s seqPorts) Pick() (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	p := 40000 + *s.next
	*s.next++
	return p, nil
}

func (s seqPorts) Close() { *s.closed++ }

// gangRig is a rig whose pool runs groups of size ranks, its auto ports
// picked by seqPorts, its allowed CPUs cpus.
type gangRig struct {
	*rig
	picked, closed int
}

func gangPool(size, minWorkers int, svc config.Service) *config.Pool {
	c := testPool("web")
	c.MinWorkers = minWorkers
	svc.GroupSize = size
	c.Service = &svc
	return c
}

func newGangRig(t *testing.T, cfg *config.Pool, ledger *capacity.Ledger, cpus string) *gangRig {
	g := &gangRig{rig: newRig(t, cfg)}
	if ledger != nil {
		g.ledger = ledger
		g.pool = g.newPool()
	}
	g.wire(g.pool, cpus)
	return g
}

// wire gives p the rig's fake ports and CPUs.
func (g *gangRig) wire(p *Pool, cpus string) {
	p.workers.Gang = workers.GangDeps{
		NewPicker:   func() workers.PortPicker { return seqPorts{next: &g.picked, closed: &g.closed} },
		AllowedCPUs: func() (cpuset.Set, error) { return cpuset.Parse(cpus) },
	}
}

func (g *gangRig) spec(slot int) units.WorkerSpec {
	g.t.Helper()
	g.sd.mu.Lock()
	defer g.sd.mu.Unlock()
	s, ok := g.sd.specs[units.UnitName("web", slot)]
	if !ok {
		g.t.Fatalf("slot %d was never started; started: %v", slot, g.sd.starts)
	}
	return s
}

// TestGangStart: each slot's worker is a group of 3 ranks, each with its
// rank, the size, its own ports (fixed: base + (slot-1)*3 + rank; auto:
// distinct), every rank's address in rank order, and its own CPUs.
func TestGangStart(t *testing.T) {
	cfg := gangPool(3, 2, config.Service{Address: "10.0.0.5", CPUSetSplit: true,
		Ports: []config.Port{{Name: "http", Base: 8000}, {Name: "metrics"}}})
	g := newGangRig(t, cfg, nil, "0-5")
	g.start(g.pool)

	if n := g.pool.workers.Live(); n != 2 {
		t.Fatalf("%d live workers, want 2 groups", n)
	}
	for slot := 1; slot <= 2; slot++ {
		s := g.spec(slot)
		if len(s.Ranks) != 3 {
			t.Fatalf("slot %d: %d ranks, want 3", slot, len(s.Ranks))
		}
		base := 8000 + (slot-1)*3
		auto := 40000 + (slot-1)*3
		for r, rk := range s.Ranks {
			want := map[string]string{
				"FLEXIQ_RANK": fmt.Sprint(r), "FLEXIQ_GROUP_SIZE": "3",
				"FLEXIQ_PORT_HTTP": fmt.Sprint(base + r), "FLEXIQ_PORT_METRICS": fmt.Sprint(auto + r),
				"FLEXIQ_PEERS_HTTP":    fmt.Sprintf("10.0.0.5:%d,10.0.0.5:%d,10.0.0.5:%d", base, base+1, base+2),
				"FLEXIQ_PEERS_METRICS": fmt.Sprintf("10.0.0.5:%d,10.0.0.5:%d,10.0.0.5:%d", auto, auto+1, auto+2),
			}
			if !maps.Equal(rk.Environment, want) {
				t.Errorf("slot %d rank %d: environment\n%v, want\n%v", slot, r, rk.Environment, want)
			}
			if wantCPUs := []string{"0-1", "2-3", "4-5"}[r]; rk.AllowedCPUs != wantCPUs {
				t.Errorf("slot %d rank %d: AllowedCPUs %q, want %q", slot, r, rk.AllowedCPUs, wantCPUs)
			}
		}
	}
	if g.closed != 2 {
		t.Errorf("the port picker was closed %d times, want once per group", g.closed)
	}
	listed, _ := g.sd.ListWorkers(t.Context(), "web")
	if len(listed) != 2 || len(listed[0].Ranks) != 2 || listed[0].Ranks[1].Unit != "flexiq-web@1-r2.service" {
		t.Errorf("listing %+v, want 2 rank-0 units, each with ranks 1 and 2", listed)
	}
	// Rank 0 is the worker: the fleet, readiness and discovery see it.
	if w := g.pool.workers.Slots.Live[1]; w == nil || w.Unit() != "flexiq-web@1.service" || w.Size() != 3 {
		t.Errorf("slot 1's worker = %+v, want rank 0's unit, size 3", w)
	}
	if v := g.pool.View(); v.Workers.GroupSize != 3 || v.Workers.Live != 2 {
		t.Errorf("view counts %+v, want 2 live groups of 3", v.Workers)
	}
	if st := g.pool.Status().String(); !strings.Contains(st, "2/10 groups of 3") {
		t.Errorf("status %q does not count groups", st)
	}
}

// TestGangCPUSetTooSmall: fewer CPUs than ranks fails the start, which
// backs off, and starts no unit.
func TestGangCPUSetTooSmall(t *testing.T) {
	g := newGangRig(t, gangPool(3, 1, config.Service{CPUSetSplit: true}), nil, "0-1")
	g.start(g.pool)
	if len(g.sd.starts) != 0 {
		t.Fatalf("started %v with 2 CPUs for 3 ranks", g.sd.starts)
	}
	if got := g.lines("failed to start", "cpuset_split", "fewer than the 3 ranks", `FLEXIQ_BACKOFF_SEC="1"`); len(got) != 1 {
		t.Fatalf("no failed start with backoff in:\n%s", g.log)
	}
}

// TestGangCapacity: a group claims its ranks' cores, and the host holds
// as many groups as fit.
func TestGangCapacity(t *testing.T) {
	ledger := capacity.NewLedger(capacity.Budget{Cores: 8, Memory: 1 << 40})
	cfg := gangPool(3, 1, config.Service{})
	cfg.MaxWorkers = 5
	cfg.Limits.CPUQuotaPerSecUSec = 1_000_000 // one core per rank
	g := newGangRig(t, cfg, ledger, "")
	g.start(g.pool)
	g.src.set(100, 0, nil)
	g.tick(time.Second)
	if n := g.pool.workers.Live(); n != 2 {
		t.Fatalf("%d groups live, want the 2 that fit in 8 cores", n)
	}
	if len(g.lines("capacity exhausted", "short of")) != 1 {
		t.Errorf("no capacity-exhausted entry in:\n%s", g.log)
	}
	// 6 of the 8 cores are the groups': another pool gets 2.
	if n, _ := ledger.Claim("other", capacity.Cost{Cores: 1}, 5); n != 2 {
		t.Errorf("another pool was granted %d cores' workers, want 2", n)
	}
}

// crashRank ends the group in slot: rank failed with result and exit
// status 3, the others as others says ("" = unloaded, or a state).
func (g *gangRig) crashRank(slot, rank int, result string, others map[int]string) {
	g.sd.mu.Lock()
	defer g.sd.mu.Unlock()
	for name, w := range g.sd.units {
		if w.Slot != slot {
			continue
		}
		switch st := others[w.Rank]; {
		case w.Rank == rank:
			w.ActiveState, w.SubState, w.Result, w.ExecMainCode, w.ExecMainStatus = "failed", "failed", result, 1, 3
		case st == "":
			delete(g.sd.units, name)
		default:
			w.ActiveState = st
		}
	}
}

// TestGangCrash: rank 1 exits with a failure and systemd stops the other
// ranks; the pool logs one crash for the group naming rank 1, and
// re-places the whole group in the same slot after the backoff.
func TestGangCrash(t *testing.T) {
	g := newGangRig(t, gangPool(3, 1, config.Service{}), nil, "")
	g.start(g.pool)
	g.crashRank(1, 1, "exit-code", nil)
	g.tick(time.Second)

	crashes := g.lines("stopped without being asked")
	if len(crashes) != 1 {
		t.Fatalf("%d crash entries, want one for the group:\n%s", len(crashes), g.log)
	}
	for _, want := range []string{`FLEXIQ_RANK="1"`, `FLEXIQ_RESULT="exit-code"`, `FLEXIQ_EXIT_STATUS="3"`,
		`FLEXIQ_RANK_UNIT="flexiq-web@1-r1.service"`, "rank 1 (flexiq-web@1-r1.service) is failed (exit status 3), Result=exit-code"} {
		if !strings.Contains(crashes[0], want) {
			t.Errorf("crash entry lacks %q:\n%s", want, crashes[0])
		}
	}
	if n := len(g.sd.units); n != 0 {
		t.Errorf("%d units left; the failed rank should have been reset", n)
	}
	if len(g.sd.starts) != 1 {
		t.Fatalf("re-placed during the backoff: %v", g.sd.starts)
	}
	g.tick(1100 * time.Millisecond)
	if len(g.sd.starts) != 2 || g.sd.starts[1] != "flexiq-web@1.service" {
		t.Fatalf("starts %v, want the group re-placed in slot 1 after its backoff", g.sd.starts)
	}
	if n := g.sd.count("active"); n != 3 {
		t.Errorf("%d active units, want the 3 ranks", n)
	}
	if len(g.lines("stopped without being asked")) != 1 || len(g.lines(" stopped, Result=")) != 0 {
		t.Errorf("more than the one crash entry:\n%s", g.log)
	}
}

// TestGangCrashRanksStillStopping: rank 2 fails while rank 0 and 1 still
// run. The pool logs one crash naming rank 2, stops what runs, and keeps
// the slot taken until every rank is gone: no group in slot 1 meanwhile.
func TestGangCrashRanksStillStopping(t *testing.T) {
	g := newGangRig(t, gangPool(3, 1, config.Service{}), nil, "")
	g.start(g.pool)
	g.crashRank(1, 2, "signal", map[int]string{0: "active", 1: "deactivating"})
	g.tick(time.Second)

	crashes := g.lines("stopped without being asked", `FLEXIQ_RANK="2"`, `FLEXIQ_RESULT="signal"`)
	if len(crashes) != 1 || len(g.lines("stopped without being asked")) != 1 {
		t.Fatalf("want one crash entry naming rank 2:\n%s", g.log)
	}
	if !slices.Contains(g.sd.stops, "flexiq-web@1.service") {
		t.Errorf("rank 0 still running and not stopped: stops %v", g.sd.stops)
	}
	if n := g.pool.workers.Draining(); n != 1 {
		t.Errorf("draining = %d, want the one group", n)
	}
	// The backoff is over, the ranks are still stopping: slot 1 is
	// taken, so the group is re-placed in slot 2.
	g.tick(1100 * time.Millisecond)
	if slices.Contains(g.sd.starts[1:], "flexiq-web@1.service") {
		t.Fatalf("slot 1 re-used while its ranks are stopping: %v", g.sd.starts)
	}
	if !slices.Contains(g.sd.starts, "flexiq-web@2.service") {
		t.Fatalf("starts %v, want the group re-placed in slot 2", g.sd.starts)
	}
	for _, u := range []string{"flexiq-web@1.service", "flexiq-web@1-r1.service"} {
		g.sd.finish(u, "success")
	}
	g.tick(time.Second)
	if n := g.pool.workers.Draining(); n != 0 {
		t.Errorf("draining = %d after every rank is gone, want 0", n)
	}
	if len(g.lines("stopped without being asked")) != 1 || len(g.lines(" stopped, Result=")) != 0 {
		t.Errorf("more than the one crash entry:\n%s", g.log)
	}
}

// TestGangCrashLoopKeepsItsSlot: a group that crashes again within its
// backoff, its ranks still stopping, does not move on to the next slot.
func TestGangCrashLoopKeepsItsSlot(t *testing.T) {
	g := newGangRig(t, gangPool(2, 1, config.Service{}), nil, "")
	g.start(g.pool)
	g.crashRank(1, 1, "exit-code", map[int]string{0: "deactivating"})
	g.tick(time.Second)
	g.tick(500 * time.Millisecond)
	if len(g.sd.starts) != 1 {
		t.Fatalf("started %v during the backoff", g.sd.starts)
	}
}

// TestGangStartFailureBacksOff: a group whose rank 1 fails to start is a
// failed start of the slot: backoff, then the whole group again.
func TestGangStartFailureBacksOff(t *testing.T) {
	g := newGangRig(t, gangPool(3, 1, config.Service{}), nil, "")
	g.sd.failStart = &units.StartError{JobResult: "failed", Result: "exit-code", ExitStatus: 1, Unit: "flexiq-web@1-r1.service"}
	g.start(g.pool)
	if len(g.lines("failed to start", `FLEXIQ_BACKOFF_SEC="1"`, `FLEXIQ_RANK="1"`, "rank 1, flexiq-web@1-r1.service, failed")) != 1 {
		t.Fatalf("no failed start naming rank 1, with backoff:\n%s", g.log)
	}
	g.tick(500 * time.Millisecond)
	if len(g.sd.starts) != 1 {
		t.Fatalf("retried during the backoff: %v", g.sd.starts)
	}
	if n := len(g.sd.units); n != 0 {
		t.Errorf("%d units left; the failed rank should have been reset", n)
	}
	g.sd.failStart = nil
	g.tick(600 * time.Millisecond)
	if n := g.sd.count("active"); n != 3 {
		t.Fatalf("%d active units after the backoff, want the group's 3", n)
	}
}

// TestGangAdoptAfterDaemonDown: rank 1 failed while the daemon was down and
// systemd stopped the rest; the next daemon finds only the failed rank,
// logs the group's end once, naming rank 1, resets it and places the group
// again after the slot's backoff.
func TestGangAdoptAfterDaemonDown(t *testing.T) {
	g := newGangRig(t, gangPool(3, 1, config.Service{}), nil, "")
	g.start(g.pool)
	g.crashRank(1, 1, "exit-code", nil)
	g.pool = g.newPool()
	g.wire(g.pool, "")
	g.start(g.pool)
	if got := g.lines("stopped without being asked", `FLEXIQ_RANK="1"`, `FLEXIQ_RESULT="exit-code"`, "flexiq-web@1-r1.service"); len(got) != 1 {
		t.Fatalf("want one crash entry naming rank 1:\n%s", g.log)
	}
	if n := len(g.sd.units); n != 0 {
		t.Fatalf("%d units left during the backoff; the failed rank should have been reset", n)
	}
	g.tick(1100 * time.Millisecond)
	if n := g.sd.count("active"); n != 3 {
		t.Fatalf("%d active units, want the group placed again", n)
	}
	if len(g.lines("stopped without being asked")) != 1 {
		t.Errorf("more than one crash entry:\n%s", g.log)
	}

	// And a running group is adopted as one worker of 3 ranks, no entry.
	q := g.newPool()
	g.wire(q, "")
	g.start(q)
	if w := q.workers.Slots.Live[1]; w == nil || w.Size() != 3 || q.workers.Live() != 1 {
		t.Fatalf("adopted %+v, want one group of 3", w)
	}
	if len(g.sd.starts) != 2 || len(g.lines("stopped without being asked")) != 1 {
		t.Errorf("starts %v, want none for the adopted group; log:\n%s", g.sd.starts, g.log)
	}
}

// TestGangScaleDown: a group stopped by the pool drains as one worker; its
// slot stays taken until its last rank is gone, and its end is one entry.
func TestGangScaleDown(t *testing.T) {
	g := newGangRig(t, gangPool(3, 2, config.Service{}), nil, "")
	g.start(g.pool)
	ws := g.pool.workers
	ctx := t.Context()
	// A scale-down never takes the ready replicas below min_workers: as
	// after a reload that lowered it.
	ws.Cfg.MinWorkers = 1
	ws.DrainDownTo(ctx, g.clock.now, 1)
	if ws.Live() != 1 || ws.Draining() != 1 {
		t.Fatalf("live %d, draining %d; want 1 and 1", ws.Live(), ws.Draining())
	}
	reconcile := func() {
		listed, err := ws.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ws.Reconcile(ctx, g.clock.now, listed)
	}
	victim := ws.Slots.LiveWorkers()[0].Slot()%2 + 1
	g.sd.finish(units.UnitName("web", victim), "success")
	reconcile()
	if ws.Draining() != 1 {
		t.Fatalf("draining %d with ranks 1 and 2 still stopping, want 1", ws.Draining())
	}
	if slots := ws.Slots.FreeSlots(g.clock.now, 1, nil); len(slots) != 1 || slots[0] == victim {
		t.Fatalf("free slots %v: slot %d is free while its ranks stop", slots, victim)
	}
	for r := 1; r <= 2; r++ {
		g.sd.finish(units.RankUnitName("web", victim, r), "success")
	}
	reconcile()
	if ws.Draining() != 0 {
		t.Fatalf("draining %d after every rank is gone, want 0", ws.Draining())
	}
	if n := len(g.lines(" stopped, Result=success")); n != 1 {
		t.Errorf("%d stop entries, want one for the group:\n%s", n, g.log)
	}
	if n := len(g.lines("stopped without being asked")); n != 0 {
		t.Errorf("a scale-down reported as a crash:\n%s", g.log)
	}
}

// TestGangRank0Crash: rank 0 itself fails; the entry names it.
func TestGangRank0Crash(t *testing.T) {
	g := newGangRig(t, gangPool(2, 1, config.Service{}), nil, "")
	g.start(g.pool)
	g.crashRank(1, 0, "core-dump", nil)
	g.tick(time.Second)
	if len(g.lines("stopped without being asked", `FLEXIQ_RANK="0"`, `FLEXIQ_RESULT="core-dump"`, "rank 0 (flexiq-web@1.service) is failed")) != 1 {
		t.Fatalf("no crash entry naming rank 0:\n%s", g.log)
	}
}

// TestGangInDiscovery: a ready group is in the JSON file with every rank
// and its ports (rank 0 first), in file_sd by rank 0 only, and a restarted
// daemon reads the ranks' ports back and rewrites nothing.
func TestGangInDiscovery(t *testing.T) {
	sr := newServiceRig(t, config.ReadyActive, 8000)
	sr.cfg.Service.GroupSize = 3
	sr.cfg.MinWorkers = 1
	sr.pool = sr.newPool()
	sr.start(sr.pool)
	sr.settle()
	want := []string{"flexiq-web@1.service", "flexiq-web@1-r1.service", "flexiq-web@1-r2.service"}
	if got := sr.published(); !slices.Equal(got, want) {
		t.Fatalf("discovery lists %v, want %v", got, want)
	}
	json := func() string {
		b, err := os.ReadFile(filepath.Join(sr.disc, "web.json"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	before := json()
	for _, port := range []string{`"http": 8000`, `"http": 8001`, `"http": 8002`, `"rank": 2`} {
		if !strings.Contains(before, port) {
			t.Errorf("discovery lacks %s:\n%s", port, before)
		}
	}
	sd, err := os.ReadFile(filepath.Join(sr.disc, "web.file_sd.json"))
	if err != nil || strings.Count(string(sd), `"targets"`) != 1 || !strings.Contains(string(sd), "127.0.0.1:8000") {
		t.Errorf("file_sd should scrape rank 0 only (%v):\n%s", err, sd)
	}
	sr.pool = sr.newPool()
	sr.start(sr.pool)
	sr.settle()
	if got := json(); got != before {
		t.Errorf("after a restart discovery is\n%s\nwant\n%s", got, before)
	}
}

// kernelPorts picks as the kernel does while no rank listens yet: each
// picker, a group's, starts again from the lowest free port, since the
// last group's listeners were closed.
type kernelPorts struct{ next int }

func (k *kernelPorts) Pick() (int, error) { k.next++; return 40000 + k.next - 1, nil }
func (k *kernelPorts) Close()             {}

// TestGangAutoPortsDistinct: groups started in the same round, and a group
// started beside one whose ranks do not listen yet, get ports of their
// own, as single replicas do. The old picker gave every group 40000 and
// 40001.
func TestGangAutoPortsDistinct(t *testing.T) {
	g := newGangRig(t, gangPool(2, 3, config.Service{Ports: []config.Port{{Name: "http"}}}), nil, "0-5")
	g.pool.workers.Gang.NewPicker = func() workers.PortPicker { return &kernelPorts{} }
	g.start(g.pool)
	seen := map[string]string{}
	for slot := 1; slot <= 3; slot++ {
		for r, rk := range g.spec(slot).Ranks {
			p, who := rk.Environment["FLEXIQ_PORT_HTTP"], fmt.Sprintf("slot %d rank %d", slot, r)
			if other, dup := seen[p]; dup {
				t.Errorf("%s got port %s, which %s has", who, p, other)
			}
			seen[p] = who
		}
	}
}
