package simulate

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The shipped n8n example replayed over a trace with host CPU: the
// rules, the 90 s cooldown and the host guard, as a golden table.
func TestN8NExampleGolden(t *testing.T) {
	cfg, err := config.Load("../../packaging/deb/examples/n8n-rules.toml")
	if err != nil {
		t.Fatal(err)
	}
	trace, err := os.ReadFile("testdata/n8n-rules.csv")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := RunGuarded(cfg.Pools["n8n"], cfg.HostGuard, bytes.NewReader(trace), -1, FormatTable, &out); err != nil {
		t.Fatal(err)
	}
	golden := "testdata/n8n-rules.golden"
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("replay differs from %s (go test -update to accept):\n%s", golden, out.String())
	}
}

// One decision per row, in jsonl, with the host columns and what the
// policies did.
func TestPoliciesReplay(t *testing.T) {
	type row struct {
		desired int
		action  policy.Action
		rule    string
		limit   string
		guard   policy.GuardOutcome
	}
	guard := &config.HostGuard{GuardParams: policy.DefaultGuardParams()}
	guard.EmergencyCooldown = 10 * time.Second
	hpa := func() *config.Pool {
		p := testPool()
		p.ScaleDownWindow = 0
		return p
	}
	limited := hpa()
	limited.Scaling.Behavior = policy.Behavior{Up: policy.DirectionBehavior{Select: policy.SelectMax,
		Policies: []policy.RateLimit{{Type: policy.LimitWorkers, Value: 2, Period: 15 * time.Second}}}}
	rules := hpa()
	rules.Scaling = config.Scaling{Policy: config.PolicyRules,
		ScaleUp:   []policy.Rule{{When: `promql("up == bool 0") || psi_memory > 50`, Step: 3}},
		ScaleDown: &policy.Rule{When: `mem_available < 1000`, Step: 1}}
	tests := []struct {
		name  string
		pool  *config.Pool
		guard *config.HostGuard
		trace string
		want  []row
	}{
		{"rate limit", limited, nil, "t,pending,running\n0,100,0\n5,100,0\n15,100,0\n", []row{
			{3, policy.ScaleUp, "", "scale_up rate limit: 3", ""},
			{3, policy.Stable, "", "scale_up rate limit: 3", ""},
			{5, policy.ScaleUp, "", "scale_up rate limit: 5", ""},
		}},
		{"guard", hpa(), guard, "t,pending,running,host_cpu\n0,50,0,0.1\n5,100,0,0.7\n10,100,0,0.95\n15,100,0,0.95\n20,100,0,0.95\n", []row{
			{5, policy.ScaleUp, "", "", ""},
			{5, policy.Stable, "", "", policy.GuardBlocked},
			{4, policy.ScaleDown, "", "", policy.GuardForced},
			{4, policy.Stable, "", "", policy.GuardBlocked},
			{3, policy.ScaleDown, "", "", policy.GuardForced},
		}},
		{"no host column: the guard judges nothing", hpa(), guard, "t,pending,running\n0,50,0\n", []row{
			{5, policy.ScaleUp, "", "", ""},
		}},
		{"rules over promql and host columns", rules, nil,
			"t,pending,running,psi_memory,mem_available,promql:up == bool 0\n0,0,0,10,5000,1\n1,0,0,60,5000,0\n2,0,0,10,500,0\n3,0,0,10,500,\n", []row{
				{4, policy.ScaleUp, "scale_up[0]", "", ""},
				{7, policy.ScaleUp, "scale_up[0]", "", ""},
				{6, policy.ScaleDown, "scale_down", "", ""},
				{6, policy.Hold, "scale_up[0]", "", ""},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := RunGuarded(tt.pool, tt.guard, strings.NewReader(tt.trace), -1, FormatJSONL, &out); err != nil {
				t.Fatal(err)
			}
			rows := decodeRows(t, out.String())
			if len(rows) != len(tt.want) {
				t.Fatalf("%d rows, want %d:\n%s", len(rows), len(tt.want), out.String())
			}
			for i, w := range tt.want {
				r := rows[i]
				if r.Desired != w.desired || r.Action != string(w.action) || r.Rule != w.rule || r.Limit != w.limit || r.Guard != string(w.guard) {
					t.Errorf("row %d: %+v, want %+v", i, r, w)
				}
			}
		})
	}
}

func TestHostColumnErrors(t *testing.T) {
	for _, tt := range []struct{ trace, want string }{
		{"t,pending,running,host_cpu\n0,0,0,1.5\n", "column host_cpu: 1.5 is outside 0..1"},
		{"t,pending,running,mem_available\n0,0,0,lots\n", `column mem_available: "lots" is not a byte count`},
		{"t,pending,running,promql:x\n0,0,0,yes\n", `column promql:x: "yes" is not a number`},
		{"t,pending,running,hostcpu\n", `unknown column "hostcpu"`},
	} {
		err := RunGuarded(testPool(), nil, strings.NewReader(tt.trace), -1, FormatJSONL, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("trace %q: err %v, want %q", tt.trace, err, tt.want)
		}
	}
}

type policyRow struct {
	Desired int    `json:"desired"`
	Action  string `json:"action"`
	Rule    string `json:"rule"`
	Limit   string `json:"limit"`
	Guard   string `json:"guard"`
	HostCPU *float64
}

func decodeRows(t *testing.T, out string) []policyRow {
	t.Helper()
	var rows []policyRow
	for line := range strings.Lines(out) {
		var r policyRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("bad jsonl line %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}
