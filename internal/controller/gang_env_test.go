package controller

import (
	"errors"
	"maps"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/cpuset"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

func TestGangPortsFor(t *testing.T) {
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

// TestFreePorts: the ports picked for one group are distinct and free
// again once the picker is closed, for the ranks to bind.
func TestFreePorts(t *testing.T) {
	p := newFreePorts()
	seen := map[int]bool{}
	for range 3 {
		port, err := p.pick()
		if err != nil {
			t.Fatal(err)
		}
		if port <= 0 || seen[port] {
			t.Fatalf("picked %d after %v", port, seen)
		}
		seen[port] = true
	}
	p.close()
	for port := range seen {
		l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d still held after close: %v", port, err)
		}
		l.Close()
	}
}

func TestListedGroupSize(t *testing.T) {
	cases := []struct {
		w    units.Worker
		want int
	}{
		{units.Worker{}, 1},
		{units.Worker{Environment: []string{"A=1", "FLEXIQ_GROUP_SIZE=4"}, Ranks: make([]units.Worker, 1)}, 4},
		{units.Worker{Environment: []string{"FLEXIQ_GROUP_SIZE=x"}, Ranks: make([]units.Worker, 2)}, 3},
		{units.Worker{Ranks: make([]units.Worker, 2)}, 3},
	}
	for i, tc := range cases {
		if got := listedGroupSize(tc.w); got != tc.want {
			t.Errorf("case %d: listedGroupSize = %d, want %d", i, got, tc.want)
		}
	}
}

func TestRankOf(t *testing.T) {
	for unit, want := range map[string]int{
		"flexiq-web@1-r1.service":  1,
		"flexiq-web@12-r7.service": 7,
		"flexiq-web@1.service":     0,
		"flexiq-web@1-r0.service":  0,
		"flexiq-web@1-r01.service": 0,
		"flexiq-web@x-r1.service":  0,
		"flexiq-web@1-r1.socket":   0,
		"web":                      0,
	} {
		got, ok := rankOf(unit)
		if ok != (want > 0) || got != want {
			t.Errorf("rankOf(%q) = %d, %v; want %d", unit, got, ok, want)
		}
	}
}
