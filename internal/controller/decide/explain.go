package decide

// `flexiq-scaled explain POOL`: every decision with its inputs and the steps
// that led from them to the result. The steps are a plain list, so that each
// part of the controller adds its own: the signals and windows of the policy
// here, the operator's override and dry-run below, and further steps (a host
// guard, rate limits, capacity, deferral) wherever they act, with
// api.Explanation.Add.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/controller/snapshot"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// Explain turns the policy's decision into steps.
func Explain(wall time.Time, d policy.Decision, p policy.Params, o policy.Observation, c source.Counts, srcErr error) *api.Explanation {
	e := &api.Explanation{Time: wall, Current: d.Current}
	if srcErr != nil {
		e.Add(api.Step{Name: "source", Value: "error", Held: true, Note: snapshot.ShortError(srcErr) + ": holding within the bounds"})
	} else {
		note := fmt.Sprintf("pending=%d running=%d", c.Pending, c.Running)
		if c.Paused > 0 {
			note += fmt.Sprintf(" paused=%d", c.Paused)
		}
		if o.Running != c.Running {
			note += fmt.Sprintf(" (%d running on the live workers)", o.Running)
		}
		e.Add(api.Step{Name: "source", Value: "ok", Note: note})
	}
	if d.Action == policy.Hold && srcErr != nil {
		e.Add(api.Step{Name: "bounds", Value: fmt.Sprintf("%d..%d", p.MinWorkers, p.MaxWorkers)})
		return e
	}
	e.Add(api.Step{Name: "depth", Value: strconv.Itoa(d.Depth),
		Note: fmt.Sprintf("ceil(pending %d / target_queue_depth_per_worker %g)", o.Pending, p.TargetQueueDepthPerWorker)})
	e.Add(api.Step{Name: "busy", Value: strconv.Itoa(d.Busy),
		Note: fmt.Sprintf("ceil(running %d / threads_per_worker %d / target_utilisation %g)", o.Running, p.ThreadsPerWorker, p.TargetUtilisation)})
	switch {
	case d.CPUUsed:
		e.Add(api.Step{Name: "cpu", Value: strconv.Itoa(d.CPU), Note: fmt.Sprintf("ceil(%d workers x mean utilisation %.2f / target %g)", d.Current, o.CPU, p.TargetCPUUtilisation)})
	case p.TargetCPUUtilisation > 0:
		e.Add(api.Step{Name: "cpu", Value: "-", Note: "no worker sampled over a full tick yet"})
	default:
		e.Add(api.Step{Name: "cpu", Value: "off"})
	}
	switch {
	case d.LatencyUsed:
		e.Add(api.Step{Name: "latency", Value: strconv.Itoa(d.Latency), Note: fmt.Sprintf("oldest ready job waited %s against %s", o.OldestAge.Round(time.Millisecond), p.TargetQueueLatency)})
	case p.TargetQueueLatency > 0:
		e.Add(api.Step{Name: "latency", Value: "-", Note: "no ready job, or the source cannot tell its age"})
	default:
		e.Add(api.Step{Name: "latency", Value: "off"})
	}
	if d.Overloaded {
		e.Add(api.Step{Name: "overload", Value: "yes", Note: "more jobs running than the workers have threads: at least one more worker"})
	}
	tol := d.Rationale != "" && strings.Contains(d.Rationale, "within tolerance")
	e.Add(api.Step{Name: "bounds", Value: fmt.Sprintf("%d..%d", p.MinWorkers, p.MaxWorkers)})
	e.Add(api.Step{Name: "tolerance", Value: strconv.FormatFloat(p.Tolerance, 'f', -1, 64), Held: tol,
		Note: map[bool]string{true: fmt.Sprintf("within tolerance of %d: recommendation snapped to it", d.Current), false: ""}[tol]})
	e.Add(api.Step{Name: "recommendation", Value: strconv.Itoa(d.Raw), Note: "this tick alone"})
	e.Add(api.Step{Name: "scale_up_window", Value: strconv.Itoa(d.Up), Held: d.Desired < d.Raw && d.Desired >= d.Current,
		Note: fmt.Sprintf("least recommendation in the last %s", p.ScaleUpWindow)})
	e.Add(api.Step{Name: "scale_down_window", Value: strconv.Itoa(d.Down), Held: d.Desired > d.Raw && d.Desired <= d.Current,
		Note: fmt.Sprintf("greatest recommendation in the last %s", p.ScaleDownWindow)})
	// Issue 9's steps, after the windows, in the order they apply.
	if d.LittlesLawUsed {
		e.Add(api.Step{Name: "littles_law", Value: strconv.Itoa(d.LittlesLaw), Note: "busy threads that arrival rate x service time predict"})
	}
	if d.OnsetUsed {
		e.Add(api.Step{Name: "onset", Value: strconv.Itoa(d.Onset), Note: "jobs waiting over the oldest one's age x the last service time observed"})
	}
	if d.KeepWarmUsed {
		e.Add(api.Step{Name: "keep_warm", Value: strconv.Itoa(d.KeepWarm), Note: fmt.Sprintf("floor for %s after the last work", p.KeepWarm)})
	}
	if d.Rule != "" {
		e.Add(api.Step{Name: "rule", Value: d.Rule})
	}
	if d.Limit != "" {
		e.Add(api.Step{Name: "rate_limit", Value: d.Limit, Held: true})
	}
	switch d.Guard {
	case policy.GuardBlocked:
		e.Add(api.Step{Name: "host_guard", Value: "blocked", Held: true, Note: "no headroom on the host for a scale-up"})
	case policy.GuardForced:
		e.Add(api.Step{Name: "host_guard", Value: "emergency", Note: "the host is saturated: one worker drained"})
	}
	return e
}

// Finish records the result of the tick in e.
func Finish(e *api.Explanation, d policy.Decision, mode string) {
	e.Action, e.Desired, e.Mode, e.Rationale = string(d.Action), d.Desired, mode, d.Rationale
	e.Steps = append(e.Steps, api.Step{Name: "result", Value: fmt.Sprintf("%s %d -> %d", d.Action, d.Current, d.Desired), Note: d.Rationale})
}
