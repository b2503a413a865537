package policy

// Victim is what the choice of workers to stop looks at: the daemon's
// controller and the workload simulator both order their workers with
// VictimBefore, so that the simulator drains the workers the daemon would.
type Victim struct {
	Slot int
	// Util is the worker's utilisation over the last tick; a worker
	// without a full tick of samples counts as idle (0).
	Util float64
	// Outdated: the worker runs another definition than the pool's
	// current one (a rollout is under way).
	Outdated bool
}

// VictimBefore says whether a is stopped before b: workers of an outdated
// definition first (a scale-down during a rollout does some of its work),
// then the least utilised (idle first: stopping a busy worker makes its jobs
// wait out a drain), then the highest slot, so that the pool keeps its low
// slot numbers.
func VictimBefore(a, b Victim) bool {
	if a.Outdated != b.Outdated {
		return a.Outdated
	}
	if a.Util != b.Util {
		return a.Util < b.Util
	}
	return a.Slot > b.Slot
}
