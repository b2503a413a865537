package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSimulateFleet(t *testing.T) {
	cfg := writeFile(t, "config.toml", onePool)
	tr := writeFile(t, "trace.csv", "t,pending,running\n0,35,0\n5,35,0\n30,35,0\n")
	r := invoke(t, "simulate", "--config", cfg, "--trace", tr, "--fleet", "a=2,b=4", "--fleet-fail", "leader@5", "--fleet-ttl", "10s")
	if r.code != 0 {
		t.Fatalf("simulate --fleet: %v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("want one line per trace row (3), got:\n%s", r.stdout)
	}
	type row struct {
		Leader string `json:"leader"`
		Epoch  uint64 `json:"epoch"`
		Target int    `json:"target"`
		Live   int    `json:"live"`
		Event  string `json:"event"`
	}
	var rows []row
	for _, l := range lines {
		var x row
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		rows = append(rows, x)
	}
	// 35 pending at 10 a worker: 4, split 1/3 over capacities 2 and 4;
	// a leads, is powered off at 5 s, and b leads once a's lease expired.
	if rows[0].Leader != "a" || rows[0].Target != 4 || rows[0].Live != 4 {
		t.Errorf("first row %+v", rows[0])
	}
	if rows[1].Event != "power off a" || rows[1].Leader != "" {
		t.Errorf("second row %+v", rows[1])
	}
	if rows[2].Leader != "b" || rows[2].Epoch != 2 || rows[2].Live != 4 {
		t.Errorf("third row %+v", rows[2])
	}
}

func TestSimulateFleetErrors(t *testing.T) {
	cfg := writeFile(t, "config.toml", onePool)
	tr := writeFile(t, "trace.csv", trace)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"fail without fleet", []string{"--config", cfg, "--trace", tr, "--fleet-fail", "a@3"}, "--fleet-fail needs --fleet"},
		{"fleet without trace", []string{"--config", cfg, "--fleet", "a=3"}, "--fleet needs --trace"},
		{"fleet and workload", []string{"--config", cfg, "--workload", tr, "--fleet", "a=3"}, "--fleet and --workload exclude each other"},
		{"bad hosts", []string{"--config", cfg, "--trace", tr, "--fleet", "a"}, "want ID=CAPACITY"},
		{"bad failure", []string{"--config", cfg, "--trace", tr, "--fleet", "a=3", "--fleet-fail", "a"}, "want HOST@SECONDS"},
		{"bad ttl", []string{"--config", cfg, "--trace", tr, "--fleet", "a=3", "--fleet-ttl", "0s"}, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := invoke(t, append([]string{"simulate"}, tt.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) || r.stdout != "" {
				t.Errorf("want exit 2 and %q on stderr, nothing on stdout, got %v", tt.want, r)
			}
		})
	}
}
