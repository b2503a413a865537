package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// target_queue_latency_sec reaches the policy through the config file, and
// the trace's oldest_age feeds it.
func TestSimulateLatency(t *testing.T) {
	cfg := writeFile(t, "config.toml", strings.Replace(onePool, "target_queue_depth_per_worker = 10",
		"target_queue_depth_per_worker = 1000\ntarget_queue_latency_sec = 30", 1))
	tr := writeFile(t, "trace.csv", "t,pending,running,oldest_age\n0,5,0,90\n5,5,0,\n")
	r := invoke(t, "simulate", "--config", cfg, "--trace", tr, "--initial", "1")
	if r.code != 0 {
		t.Fatalf("simulate: %v", r)
	}
	var rows []map[string]any
	for l := range strings.Lines(r.stdout) {
		var row map[string]any
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		rows = append(rows, row)
	}
	if len(rows) != 2 {
		t.Fatalf("want 2 rows, got:\n%s", r.stdout)
	}
	// One worker, the oldest job waited 90 s against 30: three workers,
	// though depth asks for one.
	if rows[0]["desired"] != 3.0 || rows[0]["latency"] != 3.0 || rows[0]["oldest_age"] != 90.0 ||
		!strings.Contains(rows[0]["rationale"].(string), "latency=3") {
		t.Errorf("first row: want 1 -> 3 by latency=3, got %v", rows[0])
	}
	// No age: the signal sits out, and the scale-down window holds 3.
	if rows[1]["latency"] != nil || rows[1]["oldest_age"] != nil || rows[1]["desired"] != 3.0 {
		t.Errorf("second row: want latency and oldest_age null, held at 3, got %v", rows[1])
	}
}
