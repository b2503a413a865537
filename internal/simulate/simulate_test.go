package simulate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func testPool() *config.Pool {
	return &config.Pool{
		Name:                      "email",
		MinWorkers:                1,
		MaxWorkers:                10,
		TargetQueueDepthPerWorker: 10,
		TargetUtilisation:         0.75,
		ThreadsPerWorker:          4,
		CPUPerWorker:              1,
		Tolerance:                 0.1,
		ScaleDownWindow:           30 * time.Second,
	}
}

// trace is a burst, a failed read and a lull that the 30s scale-down window
// rides out before letting go.
const trace = `t,pending,running,cpu,oldest_age
0,0,0,,
5,100,0,,12.5
10,100,8,0.4,
# the source failed here
15,,,,
20,0,4,,
25,0,0,,
36,0,0,,
41,0,0,,
60,0,0,,
`

type outRow struct {
	T         float64  `json:"t"`
	Pending   *int64   `json:"pending"`
	Running   *int64   `json:"running"`
	OldestAge *float64 `json:"oldest_age"`
	Current   int      `json:"current"`
	Desired   int      `json:"desired"`
	Latency   *int     `json:"latency"`
	Action    string   `json:"action"`
	Rationale string   `json:"rationale"`
}

func runJSONL(t *testing.T, pool *config.Pool, trace string, initial int) []outRow {
	t.Helper()
	var out bytes.Buffer
	if err := Run(pool, strings.NewReader(trace), initial, "jsonl", &out); err != nil {
		t.Fatal(err)
	}
	var rows []outRow
	for line := range strings.Lines(out.String()) {
		var raw map[string]any
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			t.Fatalf("bad jsonl line %q: %v", line, err)
		}
		if len(raw) != 9 {
			t.Errorf("line %q has %d keys, want 9", line, len(raw))
		}
		var r outRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

func TestRunJSONL(t *testing.T) {
	rows := runJSONL(t, testPool(), trace, -1)
	want := []struct {
		current, desired int
		action           string
	}{
		{1, 1, "stable"},
		{1, 10, "scale-up"},
		{10, 10, "stable"},
		{10, 10, "hold"},
		{10, 10, "stable"}, // raw 2, held by the window
		{10, 10, "stable"},
		{10, 10, "stable"},
		{10, 2, "scale-down"}, // the 10s have left the window; the 2 at t=20 has not
		{2, 1, "scale-down"},
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		r := rows[i]
		if r.Current != w.current || r.Desired != w.desired || r.Action != w.action {
			t.Errorf("row %d (t=%g): got %d -> %d %s, want %d -> %d %s (%s)",
				i, r.T, r.Current, r.Desired, r.Action, w.current, w.desired, w.action, r.Rationale)
		}
		if !strings.HasPrefix(r.Rationale, r.Action+":") {
			t.Errorf("row %d: rationale %q", i, r.Rationale)
		}
	}
	if failed := rows[3]; failed.Pending != nil || failed.Running != nil || failed.T != 15 {
		t.Errorf("failed row: %+v, want pending and running null", failed)
	}
	if r := rows[2]; r.Pending == nil || *r.Pending != 100 || r.Running == nil || *r.Running != 8 {
		t.Errorf("row 2: %+v", r)
	}
	// The age is echoed as given; with the signal off there is no latency.
	if r := rows[1]; r.OldestAge == nil || *r.OldestAge != 12.5 || r.Latency != nil {
		t.Errorf("row 1: %+v, want oldest_age 12.5 and latency null", r)
	}
	if r := rows[0]; r.OldestAge != nil {
		t.Errorf("row 0: %+v, want oldest_age null", r)
	}
}

func TestRunLatencyColumn(t *testing.T) {
	pool := testPool()
	pool.TargetQueueLatencySec = 5
	pool.TargetQueueDepthPerWorker = 1000
	pool.ScaleDownWindow = 0
	rows := runJSONL(t, pool, `t,pending,running,oldest_age
0,3,0,10
5,3,0,
10,3,0,2.5
15,3,0,0.4
`, 2)
	want := []struct {
		desired int
		latency int // -1: null
	}{
		// Two workers, the oldest job waited twice the 5 s target: four.
		{4, 4},
		// No age known: the signal sits the tick out; depth alone asks for 1.
		{1, -1},
		// One worker, half the target: ceil(0.5) = 1.
		{1, 1},
		{1, 1},
	}
	for i, w := range want {
		r := rows[i]
		got := -1
		if r.Latency != nil {
			got = *r.Latency
		}
		if r.Desired != w.desired || got != w.latency {
			t.Errorf("row %d: desired %d latency %d, want %d and %d (%s)", i, r.Desired, got, w.desired, w.latency, r.Rationale)
		}
		lat := "latency=-"
		if w.latency >= 0 {
			lat = fmt.Sprintf("latency=%d", w.latency)
		}
		if !strings.Contains(r.Rationale, lat) {
			t.Errorf("row %d: rationale %q lacks %q", i, r.Rationale, lat)
		}
	}

	var out bytes.Buffer
	if err := Run(pool, strings.NewReader("t,pending,running,oldest_age\n0,3,0,10\n5,3,0,\n"), 2, "table", &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if f := strings.Fields(lines[1]); len(f) < 8 || f[3] != "10" || f[5] != "4" || f[6] != "4" {
		t.Errorf("table row = %q, want oldest age 10, desired 4, latency 4", lines[1])
	}
	if f := strings.Fields(lines[2]); len(f) < 8 || f[3] != "-" || f[6] != "-" {
		t.Errorf("table row = %q, want oldest age and latency -", lines[2])
	}
}

func TestRunColumnOrderAndInitial(t *testing.T) {
	// The same observations with the columns shuffled, and no optional ones.
	shuffled := "running , PENDING,t\n0,0,0\n0,100,5\n8,100,10\n,,15\n"
	rows := runJSONL(t, testPool(), shuffled, 4)
	got := []int{rows[0].Current, rows[0].Desired, rows[1].Desired, rows[2].Desired, rows[3].Desired}
	// Starting at 4 with nothing to do: no earlier recommendation is in the
	// window to hold it up, so it drops to min_workers at once.
	want := []int{4, 1, 10, 10, 10}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("current/desired = %v, want %v", got, want)
		}
	}
}

func TestRunCPUColumn(t *testing.T) {
	pool := testPool()
	pool.TargetCPUUtilisation = 0.5
	// Two workers at 100% of a 50% target want four.
	rows := runJSONL(t, pool, "t,pending,running,cpu\n0,0,0,1.0\n5,0,0,\n", 2)
	if rows[0].Desired != 4 || !strings.Contains(rows[0].Rationale, "cpu=4") {
		t.Errorf("row 0: %+v", rows[0])
	}
	// An empty cpu cell is an unknown signal, not zero load.
	if !strings.Contains(rows[1].Rationale, "cpu=-") {
		t.Errorf("row 1: %+v", rows[1])
	}
}

func TestRunTable(t *testing.T) {
	var out bytes.Buffer
	if err := Run(testPool(), strings.NewReader(trace), -1, "table", &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 10 {
		t.Fatalf("got %d lines, want a header and 9 rows:\n%s", len(lines), out.String())
	}
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "T PENDING RUNNING OLDEST_AGE CURRENT DESIRED LATENCY ACTION RATIONALE" {
		t.Errorf("header = %q", lines[0])
	}
	if f := strings.Fields(lines[4]); len(f) < 8 || f[0] != "15" || f[1] != "-" || f[2] != "-" || f[7] != "hold" {
		t.Errorf("failed row = %q", lines[4])
	}
	// Aligned: every row's ACTION column starts where the header's does.
	col := strings.Index(lines[0], "ACTION")
	for _, l := range lines[1:] {
		if l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("row %q is not aligned with the header", l)
		}
	}
}

func TestRunBadInput(t *testing.T) {
	tests := []struct {
		name   string
		trace  string
		format string
		want   string
	}{
		{"empty trace", "", "jsonl", "trace is empty"},
		{"unknown format", "t,pending,running\n", "yaml", `unknown output format "yaml"`},
		{"missing column", "t,running\n0,0\n", "jsonl", `trace line 1: no "pending" column`},
		{"unknown column", "t,pendng,running\n", "jsonl", `trace line 1, column 2: unknown column "pendng"`},
		{"duplicate column", "t,pending,running,t\n", "jsonl", `trace line 1, column 4: column "t" appears twice`},
		{"bad pending", "t,pending,running\n0,1,1\n5,abc,1\n", "jsonl", `trace line 3, column pending: "abc" is not an integer`},
		{"fractional running", "t,pending,running\n0,1,1.5\n", "jsonl", `trace line 2, column running: "1.5" is not an integer`},
		{"bad t", "t,pending,running\nsoon,1,1\n", "jsonl", `trace line 2, column t: "soon" is not a number`},
		{"empty t", "t,pending,running\n,1,1\n", "table", "trace line 2, column t: empty"},
		{"t goes back", "t,pending,running\n5,1,1\n# comment\n4,1,1\n", "jsonl", "trace line 4, column t: 4 is before"},
		{"t out of range", "t,pending,running\n1e300,1,1\n", "jsonl", "trace line 2, column t: 1e+300 seconds is out of range"},
		{"running empty", "t,pending,running\n0,5,\n", "jsonl", "trace line 2, column running: empty while pending is not"},
		{"negative cpu", "t,pending,running,cpu\n0,5,1,-0.5\n", "jsonl", "trace line 2, column cpu: must not be negative"},
		{"nan cpu", "t,pending,running,cpu\n0,5,1,NaN\n", "jsonl", `trace line 2, column cpu: "NaN" is not a number`},
		{"bad oldest_age", "t,pending,running,oldest_age\n0,5,1,old\n", "jsonl", "trace line 2, column oldest_age"},
		{"negative oldest_age", "t,pending,running,oldest_age\n0,5,1,-3\n", "jsonl", "trace line 2, column oldest_age: must not be negative"},
		{"oldest_age out of range", "t,pending,running,oldest_age\n0,5,1,1e300\n", "jsonl", "trace line 2, column oldest_age: 1e+300 seconds is out of range"},
		{"wrong field count", "t,pending,running\n0,1,1\n5,1\n", "jsonl", "line 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Run(testPool(), strings.NewReader(tt.trace), -1, tt.format, &out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("wrote output for a bad trace: %q", out.String())
			}
		})
	}
}
