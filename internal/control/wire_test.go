package control

import (
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// wireBackend answers with every field of the wire types set, so that the
// golden bodies below pin the socket's JSON (`status --json`, `explain
// --json` and a change's answer): scripts read these names, which docs/operations.md
// documents, and moving the types between packages must not change a byte.
type wireBackend struct{ fakeBackend }

var wireTime = time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)

func wireExplanation() api.Explanation {
	return api.Explanation{
		Time: wireTime, Action: "scale-up", Current: 2, Desired: 3, Mode: "active", Rationale: "depth",
		Steps: []api.Step{
			{Name: "depth", Value: "4", Note: "ceil(pending 40 / 10)"},
			{Name: "rate", Value: "3", Held: true, Note: "max_scale_up_step"},
		},
		HeldBy: "rate",
	}
}

func (b *wireBackend) Status(_ context.Context, pool string) ([]api.View, error) {
	return b.Views(pool)
}

func (b *wireBackend) Views(pool string) ([]api.View, error) {
	age, up, cpu, mem := 12.5, 30.25, 42.0, uint64(1<<20)
	e := wireExplanation()
	return []api.View{{
		Pool: "email", Mode: "pinned", DryRun: true,
		Override: &api.Override{Kind: api.OverridePinned, Workers: 3, Since: wireTime,
			Until: wireTime.Add(time.Hour), By: "uid 1000 (alice)"},
		Workers: api.WorkerCounts{Live: 2, Draining: 1, Target: 3, Min: 1, Max: 10},
		Queue:   &api.QueueView{Pending: 40, Running: 2, Paused: 5, OldestAgeSec: &age},
		Source: api.SourceView{Type: "flexiq-sqlite", Healthy: false, LastSuccess: wireTime,
			LastError: "database is locked", LastErrorAt: wireTime.Add(time.Second)},
		LastDecision: &e,
		WorkerList: []api.WorkerView{
			{Slot: 1, Unit: "flexiq-email@1.service", State: "active", UptimeSec: &up, CPUPercent: &cpu, MemoryBytes: &mem, Restarts: 2},
			{Slot: 2, Unit: "flexiq-email@2.service", State: "draining"},
		},
		UpdatedAt: wireTime,
	}, {
		// The zero view: what omitempty and omitzero leave out.
		Pool: "idle", Mode: "active", WorkerList: []api.WorkerView{},
	}}, nil
}

func (b *wireBackend) Explain(pool string, last int) ([]api.Explanation, error) {
	return []api.Explanation{wireExplanation(), {Action: "stable", Steps: []api.Step{}}}, nil
}

func TestWireJSON(t *testing.T) {
	b := &wireBackend{}
	s := &Server{Backend: b, Auth: testAuth, Now: func() time.Time { return wireTime }}
	do := func(method, path, body string) string {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req = req.WithContext(WithPeer(req.Context(), admin))
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return strings.TrimSpace(rec.Body.String())
	}
	for _, tc := range []struct{ method, path, body, golden string }{
		{"GET", "/v1/status", "", "status.json"},
		{"GET", "/v1/pools/email/explain", "", "explain.json"},
		{"POST", "/v1/pools/email/pin", `{"workers": 3}`, "pin.json"},
		{"POST", "/v1/pools/nosuch/pause", `{}`, "error.json"},
	} {
		got := do(tc.method, tc.path, tc.body) + "\n"
		file := filepath.Join("testdata", "wire", tc.golden)
		if *update {
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s %s differs from %s:\n got %s\nwant %s", tc.method, tc.path, file, got, want)
		}
	}
}

// update rewrites the golden files: only when a change of the wire format is
// meant, which the documentation of status --json (docs/operations.md) must follow.
var update = flag.Bool("update", false, "rewrite testdata/wire/*.json")
