package workers

import (
	"errors"
	"maps"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/cpuset"
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
		pp := portPlan{ports: ports, size: tc.size, pick: seqPorts{next: &next, closed: &closed}.Pick}
		got, err := pp.portsFor(tc.slot, tc.rank)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: portsFor(%d, %d) = %v, want %v", tc.name, tc.slot, tc.rank, got, tc.want)
		}
	}
	next, closed := 0, 0
	pp := portPlan{ports: ports, size: 2, pick: seqPorts{next: &next, closed: &closed, err: errors.New("no ports left")}.Pick}
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
		got, err := groupRanks(&tc.svc, 2, tc.slot, seqPorts{next: &next, closed: &closed}.Pick, tc.cpus)
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
		port, err := p.Pick()
		if err != nil {
			t.Fatal(err)
		}
		if port <= 0 || seen[port] {
			t.Fatalf("picked %d after %v", port, seen)
		}
		seen[port] = true
	}
	p.Close()
	for port := range seen {
		l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d still held after close: %v", port, err)
		}
		l.Close()
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
