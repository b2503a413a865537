package eventlog

// The kinds of issue 9's capacity, dependencies and two-phase drain, in a
// block of their own (…6b20 upward), so that other kinds can take the next
// free IDs after …6b0b.
const (
	// CapacityCapped: a pool's max_workers is above what fits on the host,
	// and was capped.
	CapacityCapped Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b20"
	// CapacityExhausted: a start was skipped, no room left in the host's
	// budget (once per episode; the next start that fits ends it).
	CapacityExhausted Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b21"
	// ScaleUpDeferred: starts wait for the units the pool requires (once
	// per episode, and once more when they are released).
	ScaleUpDeferred Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b22"
	// ConditionSkip: a worker's start_condition said "not yet" (once per
	// episode, and once more when it passes).
	ConditionSkip Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b23"
	// WorkerQuiet: a quiet worker's quiet_period_sec is over, and its stop
	// is asked (its draining event came at the start, its stopped event
	// comes when systemd reports it gone).
	WorkerQuiet Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b24"
)
