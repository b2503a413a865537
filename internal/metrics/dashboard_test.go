package metrics

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
)

// Every metric docs/grafana-dashboard.json queries is one the daemon
// exports: a renamed metric must not leave the dashboard blank.
func TestDashboardNamesExist(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	m := New(func() int64 { return 0 }, fakeWorkers{})
	age := 1.0
	m.Tick(api.TickReport{Pool: "p", Action: "stable", Queue: &api.QueueView{OldestAgeSec: &age}, SourceErr: nil})
	m.Tick(api.TickReport{Pool: "p", SourceErr: os.ErrNotExist})
	m.Event(eventlog.WorkerStarted, eventlog.Fields{"FLEXIQ_POOL": "p"})
	m.Event(eventlog.WorkerCrashed, eventlog.Fields{"FLEXIQ_POOL": "p", "FLEXIQ_RESULT": "signal"})
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, f := range families {
		have = append(have, f.GetName())
	}
	// container_memory_limit_bytes is absent without a limit.
	have = append(have, "container_memory_limit_bytes")
	used := regexp.MustCompile(`\b((?:flexiq_scaled|container|go|process)_[a-z_]+?)(?:_bucket)?\b`).FindAllStringSubmatch(string(b), -1)
	if len(used) == 0 {
		t.Fatal("no metric names found in the dashboard")
	}
	for _, u := range used {
		if !slices.Contains(have, u[1]) {
			t.Errorf("the dashboard queries %s, which the daemon does not export", u[1])
		}
	}
}
