package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/capacity"
	"github.com/flexiq/flexiq-scaled/internal/config"
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

func (s seqPorts) pick() (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	p := 40000 + *s.next
	*s.next++
	return p, nil
}

func (s seqPorts) close() { *s.closed++ }

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
	p.workers.gang = gangDeps{
		newPicker:   func() portPicker { return seqPorts{next: &g.picked, closed: &g.closed} },
		allowedCPUs: func() (cpuset.Set, error) { return cpuset.Parse(cpus) },
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

func TestPortsFor(t *testing.T) {
	ports := []config.Port{{Name: "http", Base: 8000}, {Name: "metrics"}}
	cases := []struct {
		name       string
		size       int
		slot, rank int
		want       map[string]int
	}{
		{"single replica, slot 1", 1, 1, 0, map[string]int{"http": 8000, "metrics": 40000}},
		{"single replica, slot 4", 1, 4, 0, map[string]int{"http": 8003, "metrics": 40000}},
		{"group of 3, slot 1 rank 2", 3, 1, 2, map[string]int{"http": 8002, "metrics": 40000}},
		{"group of 3, slot 2 rank 0", 3, 2, 0, map[string]int{"http": 8003, "metrics": 40000}},
		{"group of 3, slot 3 rank 1", 3, 3, 1, map[string]int{"http": 8007, "metrics": 40000}},
	}
	for _, tc := range cases {
		next, closed := 0, 0
		pp := portPlan{ports: ports, size: tc.size, pick: seqPorts{next: &next, closed: &closed}.pick}
		got, err := pp.portsFor(tc.slot, tc.rank)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: portsFor(%d, %d) = %v, want %v", tc.name, tc.slot, tc.rank, got, tc.want)
		}
	}
	next, closed := 0, 0
	pp := portPlan{ports: ports, size: 2, pick: seqPorts{next: &next, closed: &closed, err: errors.New("no ports left")}.pick}
	if _, err := pp.portsFor(2, 1); err == nil || !strings.Contains(err.Error(), "port metrics of slot 2 rank 1: no ports left") {
		t.Errorf("pick error = %v", err)
	}
}

func TestGroupRanksEnvironment(t *testing.T) {
	cases := []struct {
		name    string
		svc     config.Service
		slot    int
		cpus    []cpuset.Set
		want    []map[string]string
		allowed []string
	}{
		{"fixed ports, default address", config.Service{Ports: []config.Port{{Name: "http", Base: 9000}}}, 2, nil,
			[]map[string]string{
				{"FLEXIQ_RANK": "0", "FLEXIQ_GROUP_SIZE": "2", "FLEXIQ_PORT_HTTP": "9002", "FLEXIQ_PEERS_HTTP": "127.0.0.1:9002,127.0.0.1:9003"},
				{"FLEXIQ_RANK": "1", "FLEXIQ_GROUP_SIZE": "2", "FLEXIQ_PORT_HTTP": "9003", "FLEXIQ_PEERS_HTTP": "127.0.0.1:9002,127.0.0.1:9003"},
			}, []string{"", ""}},
		{"auto ports, IPv6 address, CPUs", config.Service{Address: "::1", Ports: []config.Port{{Name: "grpc_api"}}}, 1,
			[]cpuset.Set{{0, 1}, {2, 3}},
			[]map[string]string{
				{"FLEXIQ_RANK": "0", "FLEXIQ_GROUP_SIZE": "2", "FLEXIQ_PORT_GRPC_API": "40000", "FLEXIQ_PEERS_GRPC_API": "[::1]:40000,[::1]:40001"},
				{"FLEXIQ_RANK": "1", "FLEXIQ_GROUP_SIZE": "2", "FLEXIQ_PORT_GRPC_API": "40001", "FLEXIQ_PEERS_GRPC_API": "[::1]:40000,[::1]:40001"},
			}, []string{"0-1", "2-3"}},
		{"no ports", config.Service{}, 1, nil,
			[]map[string]string{{"FLEXIQ_RANK": "0", "FLEXIQ_GROUP_SIZE": "2"}, {"FLEXIQ_RANK": "1", "FLEXIQ_GROUP_SIZE": "2"}},
			[]string{"", ""}},
	}
	for _, tc := range cases {
		next, closed := 0, 0
		got, err := groupRanks(&tc.svc, 2, tc.slot, seqPorts{next: &next, closed: &closed}.pick, tc.cpus)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for r := range got {
			if !maps.Equal(got[r].Environment, tc.want[r]) {
				t.Errorf("%s: rank %d environment %v, want %v", tc.name, r, got[r].Environment, tc.want[r])
			}
			if got[r].AllowedCPUs != tc.allowed[r] {
				t.Errorf("%s: rank %d AllowedCPUs %q, want %q", tc.name, r, got[r].AllowedCPUs, tc.allowed[r])
			}
		}
	}
}

// TestGangStart: each slot's worker is a group of 3 ranks, each with its
// rank, the size, its own ports (fixed: base + (slot-1)*3 + rank; auto:
// distinct), every rank's address in rank order, and its own CPUs.
func TestGangStart(t *testing.T) {
	cfg := gangPool(3, 2, config.Service{Address: "10.0.0.5", CPUSetSplit: true,
		Ports: []config.Port{{Name: "http", Base: 8000}, {Name: "metrics"}}})
	g := newGangRig(t, cfg, nil, "0-5")
	g.start(g.pool)

	if n := g.pool.workers.live(); n != 2 {
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
	if w := g.pool.workers.fleet.live[1]; w == nil || w.unit != "flexiq-web@1.service" || w.size != 3 {
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
	if n := g.pool.workers.live(); n != 2 {
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
	if n := g.pool.workers.draining(); n != 1 {
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
	if n := g.pool.workers.draining(); n != 0 {
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
	if len(g.lines("failed to start", `FLEXIQ_BACKOFF_SEC="1"`)) != 1 {
		t.Fatalf("no failed start with backoff:\n%s", g.log)
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
// resets it and places the group again.
func TestGangAdoptAfterDaemonDown(t *testing.T) {
	g := newGangRig(t, gangPool(3, 1, config.Service{}), nil, "")
	g.start(g.pool)
	g.crashRank(1, 1, "exit-code", nil)
	p := g.newPool()
	g.wire(p, "")
	g.start(p)
	if n := g.sd.count("active"); n != 3 {
		t.Fatalf("%d active units, want the group placed again", n)
	}
	if n := p.workers.live(); n != 1 {
		t.Errorf("%d live groups, want 1", n)
	}

	// And a running group is adopted as one worker of 3 ranks.
	q := g.newPool()
	g.wire(q, "")
	g.start(q)
	if w := q.workers.fleet.live[1]; w == nil || w.size != 3 || q.workers.live() != 1 {
		t.Fatalf("adopted %+v, want one group of 3", w)
	}
	if len(g.sd.starts) != 2 {
		t.Errorf("starts %v, want none for the adopted group", g.sd.starts)
	}
}

func TestFoldRanks(t *testing.T) {
	listed := []units.Worker{
		{Unit: "flexiq-web@1.service", Pool: "web", Slot: 1, ActiveState: "active",
			Ranks: []units.Worker{{Unit: "flexiq-web@1-r1.service", Pool: "web", Slot: 1, Rank: 1, ActiveState: "active"}}},
		{Unit: "flexiq-web@2-r1.service", Pool: "web", Slot: 2, Rank: 1, ActiveState: "failed"},
		{Unit: "flexiq-web@2-r2.service", Pool: "web", Slot: 2, Rank: 2, ActiveState: "deactivating"},
	}
	got := foldRanks(listed)
	if len(got) != 2 || got[1].Unit != "flexiq-web@2.service" || got[1].ActiveState != "inactive" || len(got[1].Ranks) != 2 {
		t.Fatalf("foldRanks = %+v", got)
	}
	if same := foldRanks(listed[:1]); &same[0] != &listed[0] {
		t.Error("a listing without orphan ranks is copied")
	}
}

func TestGroupExit(t *testing.T) {
	rank := func(r int, state, result string) units.Worker {
		return units.Worker{Unit: units.RankUnitName("web", 1, r), Rank: r, ActiveState: state, Result: result}
	}
	rank0 := func(state string, ranks ...units.Worker) units.Worker {
		return units.Worker{Unit: "flexiq-web@1.service", ActiveState: state, Result: "success", Ranks: ranks}
	}
	cases := []struct {
		name   string
		w      units.Worker
		listed bool
		want   int // -2: the group is whole
	}{
		{"whole", rank0("active", rank(1, "active", "success"), rank(2, "activating", "success")), true, -2},
		{"rank 1 failed", rank0("active", rank(1, "failed", "exit-code"), rank(2, "deactivating", "success")), true, 1},
		{"the failure before a clean stop", rank0("inactive", rank(1, "failed", "success"), rank(2, "failed", "signal")), true, 2},
		{"a rank unloaded", rank0("active", rank(2, "active", "success")), true, 1},
		{"rank 0 unloaded", rank0("inactive", rank(1, "deactivating", "success"), rank(2, "deactivating", "success")), false, 0},
		{"rank 2 stopping", rank0("active", rank(1, "active", "success"), rank(2, "deactivating", "success")), true, 2},
		{"nothing left", units.Worker{}, false, -1},
	}
	for _, tc := range cases {
		e, ok := groupExit("flexiq-web@1.service", tc.w, tc.listed, 3)
		switch {
		case tc.want == -2 && ok:
			t.Errorf("%s: exit %+v, want none", tc.name, e)
		case tc.want != -2 && (!ok || e.rank != tc.want):
			t.Errorf("%s: exit %+v (%v), want rank %d", tc.name, e, ok, tc.want)
		case ok && e.rank >= 0 && e.unit != rankUnit("web", 1, e.rank):
			t.Errorf("%s: unit %s", tc.name, e.unit)
		}
	}
}

// TestGangRevision: the group's shape is part of the pool's definition; a
// pool without groups keeps the revision it had.
func TestGangRevision(t *testing.T) {
	single := testPool("web")
	base := specRevision(revisionSpec(single), "")
	if base != specRevision(workerSpec(single, 0, ""), "") {
		t.Fatal("a pool without groups changed its revision")
	}
	seen := map[string]string{"single": base}
	for name, svc := range map[string]config.Service{
		"group of 2":     {GroupSize: 2},
		"group of 3":     {GroupSize: 3},
		"with a port":    {GroupSize: 3, Ports: []config.Port{{Name: "http", Base: 8000}}},
		"another base":   {GroupSize: 3, Ports: []config.Port{{Name: "http", Base: 9000}}},
		"an auto port":   {GroupSize: 3, Ports: []config.Port{{Name: "http"}}},
		"split the CPUs": {GroupSize: 3, CPUSetSplit: true},
	} {
		c := testPool("web")
		c.Service = &svc
		rev := specRevision(revisionSpec(c), "")
		for other, r := range seen {
			if r == rev {
				t.Errorf("%s and %s have the same revision", name, other)
			}
		}
		seen[name] = rev
	}
}

// TestGangScaleDown: a group stopped by the pool drains as one worker; its
// slot stays taken until its last rank is gone, and its end is one entry.
func TestGangScaleDown(t *testing.T) {
	g := newGangRig(t, gangPool(3, 2, config.Service{}), nil, "")
	g.start(g.pool)
	ws := g.pool.workers
	ctx := t.Context()
	ws.drainDownTo(ctx, g.clock.now, 1)
	if ws.live() != 1 || ws.draining() != 1 {
		t.Fatalf("live %d, draining %d; want 1 and 1", ws.live(), ws.draining())
	}
	reconcile := func() {
		listed, err := ws.list(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ws.reconcile(ctx, g.clock.now, listed)
	}
	victim := ws.fleet.liveWorkers()[0].slot%2 + 1
	g.sd.finish(units.UnitName("web", victim), "success")
	reconcile()
	if ws.draining() != 1 {
		t.Fatalf("draining %d with ranks 1 and 2 still stopping, want 1", ws.draining())
	}
	if slots := ws.fleet.freeSlots(g.clock.now, 1, nil); len(slots) != 1 || slots[0] == victim {
		t.Fatalf("free slots %v: slot %d is free while its ranks stop", slots, victim)
	}
	for r := 1; r <= 2; r++ {
		g.sd.finish(units.RankUnitName("web", victim, r), "success")
	}
	reconcile()
	if ws.draining() != 0 {
		t.Fatalf("draining %d after every rank is gone, want 0", ws.draining())
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
