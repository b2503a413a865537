package controller

import (
	"fmt"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/controller/admit"
)

// addReadiness adds to e what held the tick's starts back after the
// decision: units in requires not active, a start condition not met, the
// host's budget.
func addReadiness(e *api.Explanation, r admit.Held) {
	// They come before the result, which decide.Finish has already added.
	var result []api.Step
	if n := len(e.Steps); n > 0 && e.Steps[n-1].Name == "result" {
		result, e.Steps = e.Steps[n-1:], e.Steps[:n-1]
	}
	defer func() { e.Steps = append(e.Steps, result...) }()
	if r.Deferring {
		e.Add(api.Step{Name: "deferral", Value: "waiting", Held: true, Note: "required units not active: " + r.WaitingFor})
	}
	if r.Skipping {
		e.Add(api.Step{Name: "start_condition", Value: "not met", Held: true, Note: fmt.Sprintf("skipped %d times in a row", r.Skips)})
	}
	if r.Exhausted {
		e.Add(api.Step{Name: "capacity", Value: "exhausted", Held: true, Note: "no room left in the host's worker budget"})
	}
}
