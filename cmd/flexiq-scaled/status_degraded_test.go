package main

import (
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// A degraded service pool without a queue, as status shows it.
func TestPrintStatusDegradedNoQueue(t *testing.T) {
	now := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	v := api.View{
		Pool: "web", Mode: "active",
		Workers:  api.WorkerCounts{Live: 1, Target: 2, Min: 2, Max: 6},
		Source:   api.SourceView{Type: "none", Healthy: true, LastSuccess: now.Add(-time.Second)},
		Degraded: &api.Degraded{Since: now.Add(-90 * time.Second), Reason: "1 of 2 baseline workers live; slot 2 failed 3 times in a row"},
	}
	var b strings.Builder
	printStatus(&b, []api.View{v}, now)
	for _, want := range []string{
		"× web - active, degraded\n",
		"  Degraded: for 1m30s: 1 of 2 baseline workers live; slot 2 failed 3 times in a row\n",
		"Queue: none (a service scaled by its rules and CPU)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}
