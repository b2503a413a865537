// Package policy is the scaling decision: the HPA-style replica calculation
// with tolerance, stabilisation windows and an overload override. It is pure:
// no I/O, no clock, no goroutines. Time and observations come in; a decision
// and its rationale go out.
package policy

import "time"

// Params are one pool's scaling knobs, named as in flexiq's AutoscaleConfig.
type Params struct {
	MinWorkers                int
	MaxWorkers                int
	TargetQueueDepthPerWorker float64
	TargetUtilisation         float64
	ThreadsPerWorker          int
	TargetCPUUtilisation      float64       // 0 = CPU signal off
	TargetQueueLatency        time.Duration // oldest ready job's target wait; 0 = latency signal off
	Tolerance                 float64
	ScaleUpWindow             time.Duration
	ScaleDownWindow           time.Duration
	// Demand is an extra demand signal (DemandNone, DemandLittlesLaw);
	// DemandWindow is what the source averages it over.
	Demand       string
	DemandWindow time.Duration
	// PollInterval is the pool's tick. A backlog that the pool cannot
	// clear within target_queue_latency_sec, or ClearPolls ticks when that
	// is not set, is never held by the tolerance band (see clear.go).
	PollInterval time.Duration
	// OnsetMinJobs, when > 0, adds the burst-onset signal (warm.go): the
	// jobs seen waiting over the oldest one's age, times the remembered
	// service time. Only with Demand = DemandLittlesLaw, whose service
	// time it remembers.
	OnsetMinJobs int
	// KeepWarmWorkers, when > 0, is a floor under scale-downs for KeepWarm
	// after the last tick that saw work (warm.go).
	KeepWarmWorkers int
	KeepWarm        time.Duration
	// NoQueue is set for a pool that reads no queue (a service's replicas
	// without a source): the queue's signals are left out, and a tick
	// with no other signal holds, so that the absence of a queue never
	// reads as "no work" and never scales the pool down.
	NoQueue bool
}

// Observation is what the controller saw at one tick.
type Observation struct {
	// Valid is false when the source failed; the tick is then a hold.
	Valid    bool
	Pending  int64
	Running  int64
	Current  int     // live workers: active or activating, not draining
	CPU      float64 // U: mean utilisation as a fraction of cpu_per_worker
	CPUKnown bool    // false when no worker has a full tick of samples
	// OldestAge is how long the oldest ready job has waited. Meaningful only
	// when OldestKnown, which it is not when nothing is ready or the source
	// cannot tell.
	OldestAge   time.Duration
	OldestKnown bool
	// ArrivalRate (jobs per second) and ServiceTime (the mean of the jobs
	// finished) over Params.DemandWindow, for the Little's law signal;
	// meaningful only when DemandKnown.
	ArrivalRate float64
	ServiceTime time.Duration
	DemandKnown bool
}

// Action is what the controller should do.
type Action string

const (
	ScaleUp   Action = "scale-up"
	ScaleDown Action = "scale-down"
	Stable    Action = "stable"
	Hold      Action = "hold"
)
