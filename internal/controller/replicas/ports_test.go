package replicas

import (
	"maps"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func TestPortsFor(t *testing.T) {
	cases := []struct {
		name        string
		ports       []config.Port
		group       int
		slot, rank  int
		want        map[string]int // nil: check auto ports only
		wantAutoFor []string
	}{
		{"fixed, slot 1", []config.Port{{Name: "http", Base: 8000}}, 1, 1, 0, map[string]int{"http": 8000}, nil},
		{"fixed, slot 4", []config.Port{{Name: "http", Base: 8000}}, 1, 4, 0, map[string]int{"http": 8003}, nil},
		{"fixed, gang of 3, slot 2 rank 1", []config.Port{{Name: "http", Base: 9000}}, 3, 2, 1, map[string]int{"http": 9004}, nil},
		{"auto beside fixed", []config.Port{{Name: "http", Base: 0}, {Name: "metrics", Base: 9100}}, 1, 2, 0, nil, []string{"http"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := &config.Service{Ports: tc.ports, GroupSize: tc.group, Address: "127.0.0.1"}
			taken := map[int]bool{}
			got, err := PortsFor(svc, tc.slot, tc.rank, taken)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil && !maps.Equal(got, tc.want) {
				t.Fatalf("ports %v, want %v", got, tc.want)
			}
			for _, name := range tc.wantAutoFor {
				if got[name] <= 0 {
					t.Fatalf("auto port %s = %d", name, got[name])
				}
			}
			for _, p := range got {
				if !taken[p] {
					t.Fatalf("port %d not marked taken", p)
				}
			}
		})
	}
}

// An auto port avoids the ports the pool's replicas hold.
func TestFreePortAvoidsHeld(t *testing.T) {
	taken := map[int]bool{}
	for range 50 {
		p, err := FreePort("127.0.0.1", taken)
		if err != nil {
			t.Fatal(err)
		}
		if taken[p] {
			t.Fatalf("port %d picked twice", p)
		}
		taken[p] = true
	}
}

func TestPortsFromEnvironment(t *testing.T) {
	svc := &config.Service{Ports: []config.Port{{Name: "http"}, {Name: "grpc"}}}
	cases := []struct {
		env  []string
		want map[string]int
	}{
		{[]string{"A=1", "FLEXIQ_PORT_HTTP=41234", "FLEXIQ_PORT_GRPC=41235"}, map[string]int{"http": 41234, "grpc": 41235}},
		{[]string{"FLEXIQ_PORT_HTTP=41234"}, map[string]int{"http": 41234}},
		{[]string{"FLEXIQ_PORT_HTTP=nope", "FLEXIQ_PORT_GRPC=70000"}, map[string]int{}},
		{nil, map[string]int{}},
	}
	for _, tc := range cases {
		if got := PortsFromEnvironment(svc, tc.env); !maps.Equal(got, tc.want) {
			t.Errorf("%v: ports %v, want %v", tc.env, got, tc.want)
		}
	}
}
