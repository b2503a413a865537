package policy

import "time"

// ClearPolls is how many poll intervals a backlog may take to clear when the
// pool has no target_queue_latency_sec: "a few ticks", long enough that one
// tick's burst is not a reason to grow, short enough that a backlog the pool
// cannot work off is acted on within the same burst.
const ClearPolls = 3

// clearTime judges whether the c live workers can clear the backlog within
// the pool's latency target. By Little's law a worker of ThreadsPerWorker
// threads, each job taking the mean service time W, finishes
// ThreadsPerWorker/W jobs a second, so c workers take
//
//	need = pending × W / (c × ThreadsPerWorker)
//
// to work off the jobs already waiting, before any new one. The target is
// target_queue_latency_sec, or ClearPolls poll intervals when it is not set.
// ok is false when the rule has nothing to judge by: no workers, no backlog,
// no observed service time (the demand signal off, or no job finished in its
// window), or neither target known. The rule only ever lets a scale-up
// through; with ok false the policy is exactly what it was, so missing data
// cannot move the pool.
func clearTime(p Params, o Observation) (need, target time.Duration, ok bool) {
	target = p.TargetQueueLatency
	if target <= 0 {
		target = ClearPolls * p.PollInterval
	}
	if o.Current <= 0 || o.Pending <= 0 || !o.DemandKnown || o.ServiceTime <= 0 || target <= 0 || p.ThreadsPerWorker < 1 {
		return 0, target, false
	}
	secs := float64(o.Pending) * o.ServiceTime.Seconds() / (float64(o.Current) * float64(p.ThreadsPerWorker))
	// A backlog whose clearing time does not fit in a Duration cannot be
	// cleared in any target.
	if secs >= float64(maxDuration/time.Second) {
		return maxDuration, target, true
	}
	return time.Duration(secs * float64(time.Second)), target, true
}

const maxDuration = time.Duration(1<<63 - 1)
