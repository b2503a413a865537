package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Decision is the outcome of one tick for one pool, with every intermediate
// signal kept so that logs and the simulator can explain it.
type Decision struct {
	Now     time.Time
	Action  Action
	Current int
	Desired int

	Depth       int  // workers the backlog asks for
	Busy        int  // workers the running tasks ask for at target utilisation
	CPU         int  // workers the CPU signal asks for; 0 unless CPUUsed
	CPUUsed     bool // the CPU signal took part in this decision
	Latency     int  // workers the queue latency signal asks for; 0 unless LatencyUsed
	LatencyUsed bool // the latency signal took part in this decision
	Overloaded  bool // more tasks running than the workers have threads

	// LittlesLaw: workers the Little's law demand signal asks for; 0 unless
	// LittlesLawUsed (demand = "littles-law", see demand.go).
	LittlesLaw     int
	LittlesLawUsed bool
	// Onset: workers the burst-onset signal asks for; 0 unless OnsetUsed.
	// KeepWarm: the keep-warm floor; 0 unless KeepWarmUsed (warm.go).
	Onset, KeepWarm         int
	OnsetUsed, KeepWarmUsed bool

	// ClearTime is how long the live workers need to work off the backlog
	// at the observed service time, against ClearTarget; known with
	// ClearKnown (see clear.go). Backlogged is true when it exceeds the
	// target, so that the tolerance band did not hold a scale-up.
	ClearTime, ClearTarget time.Duration
	ClearKnown, Backlogged bool

	// Raw is the recommendation of this tick alone: the signals combined,
	// clamped to the bounds and snapped to Current when within tolerance.
	Raw int
	// Up and Down are the stabilisation bounds: the least and the greatest
	// recommendation within the scale-up and scale-down windows. Zero on a
	// hold.
	Up, Down int

	Rationale string

	// Rule is the rule that acted, or failed, under policy = "rules".
	Rule string
	// Limit is the rate limit or cooldown that held the decision back.
	Limit string
	// Guard is what the host guard did to the decision.
	Guard GuardOutcome
}

// sample is one recorded recommendation.
type sample struct {
	at  time.Time
	raw int
}

// Recommender turns observations of one pool into decisions. It remembers
// the pool's recent recommendations for the stabilisation windows, so each
// pool needs its own. The zero value is ready to use. It is not safe for
// concurrent use.
type Recommender struct {
	history []sample // oldest first, pruned to the longer window
	// serviceTime is the last mean service time observed, kept across
	// the silences the demand window forgets (burst-onset signal).
	serviceTime time.Duration
	// lastWork is the last tick that saw work, if worked (keep-warm).
	lastWork time.Time
	worked   bool
}

// maxCount bounds every computed worker count. Go leaves the conversion of an
// out-of-range float to int implementation-defined, and a huge backlog over a
// small per-worker target can exceed int; a bound far above any real
// max_workers keeps the arithmetic exact for every count that matters.
const maxCount = math.MaxInt32

// ceil is ceil(x - 1e-9): float division such as 0.3/0.1 lands a hair above
// an integer and would otherwise ask for a whole extra worker. NaN (only from
// unvalidated zero targets) counts as no demand.
func ceil(x float64) int {
	v := math.Ceil(x - 1e-9)
	switch {
	case !(v > 0):
		return 0
	case v >= maxCount:
		return maxCount
	}
	return int(v)
}

// Decide computes the decision for the tick at now. Params are expected to be
// valid (the config package checks them); now should not go backwards between
// calls, as the stabilisation windows are measured against it.
func (r *Recommender) Decide(now time.Time, p Params, o Observation) Decision {
	c := o.Current
	d := Decision{Now: now, Action: Hold, Current: c, Desired: c}

	// A failed or nonsensical read tells us nothing about demand. Holding at
	// C, and keeping the tick out of the history, means missing data can
	// neither scale the pool down nor pull a later window's bounds around.
	switch {
	case !o.Valid:
		return holdWithinBounds(d, p, "source unavailable")
	case o.Pending < 0 || o.Running < 0:
		return holdWithinBounds(d, p, "negative count")
	case p.NoQueue && !(p.TargetCPUUtilisation > 0 && c > 0 && o.CPUKnown):
		// Without a queue the CPU is the formula's only signal: until it
		// is read, the pool has no observation, which must not read as
		// an idle pool to scale down.
		return holdWithinBounds(d, p, "no queue, and no CPU reading yet")
	}

	raw := r.signals(now, p, o, &d)
	raw, notes := tolerate(&d, p, c, raw)
	d.Raw = raw
	target, notes := r.stabilise(now, p, &d, c, raw, notes)

	// Tasks are already queueing for threads; waiting out a window would
	// only lengthen that queue.
	if d.Overloaded {
		if floor := min(c+1, p.MaxWorkers); target < floor {
			target = floor
			notes = append(notes, "overload")
		}
	}
	// With constant params every recorded raw is within bounds and so is the
	// target; this matters only when the bounds changed within a window.
	if t := clamp(target, p); t != target {
		target = t
		notes = append(notes, fmt.Sprintf("clamped to %d..%d", p.MinWorkers, p.MaxWorkers))
	}

	d.Desired = target
	d.Action = actionOf(target, c)
	d.Rationale = rationale(d, notes)
	return d
}

// signals fills each signal's recommendation into d and returns the highest,
// within bounds: the raw recommendation before tolerance and windows.
func (r *Recommender) signals(now time.Time, p Params, o Observation, d *Decision) int {
	c := o.Current
	d.Depth = ceil(float64(o.Pending) / p.TargetQueueDepthPerWorker)
	// With no workers the running count is stale or foreign; demand from a
	// cold start comes from the backlog alone.
	if c > 0 && o.Running > 0 {
		d.Busy = ceil(float64(o.Running) / float64(p.ThreadsPerWorker) / p.TargetUtilisation)
	}
	if p.TargetCPUUtilisation > 0 && c > 0 && o.CPUKnown {
		d.CPUUsed = true
		d.CPU = ceil(float64(c) * o.CPU / p.TargetCPUUtilisation)
	}
	if p.TargetQueueLatency > 0 && o.OldestKnown {
		d.LatencyUsed = true
		d.Latency = latency(c, o.OldestAge, p.TargetQueueLatency)
	}
	d.LittlesLaw, d.LittlesLawUsed = littlesLaw(p, o)
	d.Onset, d.OnsetUsed = r.onset(p, o)
	d.KeepWarm, d.KeepWarmUsed = r.keepWarm(now, p, o)
	d.Overloaded = c > 0 && o.Running > int64(c)*int64(p.ThreadsPerWorker)

	raw := max(d.Depth, d.Busy, d.CPU, d.Latency, d.LittlesLaw, d.Onset, d.KeepWarm, p.MinWorkers)
	if d.Overloaded {
		raw = max(raw, c+1)
	}
	raw = clamp(raw, p)
	d.ClearTime, d.ClearTarget, d.ClearKnown = clearTime(p, o)
	d.Backlogged = d.ClearKnown && d.ClearTime > d.ClearTarget
	return raw
}

// tolerate snaps raw back to the current count c when the change is within
// the tolerance band, as the HPA does, and says why in its notes.
func tolerate(d *Decision, p Params, c, raw int) (int, []string) {
	if c == 0 || d.Overloaded || raw == c || math.Abs(float64(raw-c))/float64(c) >= p.Tolerance {
		return raw, nil
	}
	if raw > c && d.Backlogged {
		// The band is there to ignore noise around a pool that keeps up.
		// A backlog the pool cannot clear in time is not noise: with
		// one-thread workers the overload rule can never fire, and a 0.5
		// band would hold 19 workers under any queue. Only a scale-up
		// passes, so a pool cannot flap on it.
		return raw, []string{fmt.Sprintf("backlog clears in %s > %s: not held by tolerance", secs(d.ClearTime), secs(d.ClearTarget))}
	}
	// Snapping to C must not carry a pool that is outside its bounds (after
	// a config change, or started by hand) any further outside them, so the
	// bounds apply again.
	return clamp(c, p), []string{"within tolerance"}
}

// stabilise is the Kubernetes HPA's stabilisation: scale up only as far as
// every recommendation in the scale-up window agrees, and down only as far
// as every recommendation in the scale-down window agrees. It records raw
// in the history.
func (r *Recommender) stabilise(now time.Time, p Params, d *Decision, c, raw int, notes []string) (int, []string) {
	upCutoff, downCutoff := now.Add(-p.ScaleUpWindow), now.Add(-p.ScaleDownWindow)
	d.Up, d.Down = raw, raw
	for _, s := range r.history {
		if s.at.After(upCutoff) {
			d.Up = min(d.Up, s.raw)
		}
		if s.at.After(downCutoff) {
			d.Down = max(d.Down, s.raw)
		}
	}
	r.record(now, raw, max(p.ScaleUpWindow, p.ScaleDownWindow))

	target := min(max(c, d.Up), d.Down)
	switch {
	case target > raw:
		notes = append(notes, fmt.Sprintf("held by scale-down window: %d", d.Down))
	case target < raw:
		notes = append(notes, fmt.Sprintf("held by scale-up window: %d", d.Up))
	}
	return target, notes
}

// latency is the queue latency signal, HireFire's and Judoscale's: the oldest
// ready job has waited age against a target of target, so the c workers
// draining the queue are age/target times too few (or too many). An idle
// pool (c = 0) with a job waiting needs one worker to start with; the
// signal grows from there as the job keeps waiting. A negative age (the
// queue's clock ahead of ours) is no wait at all.
func latency(c int, age, target time.Duration) int {
	if age <= 0 {
		return 0
	}
	if c == 0 {
		return 1
	}
	return ceil(float64(c) * (float64(age) / float64(target)))
}

// holdWithinBounds keeps the pool where it is when there is no usable
// observation, but within its bounds: min_workers is baseline capacity, which
// the pool gets at start without any observation either, and max_workers is
// a ceiling whatever the queue says. Within the bounds, missing data never
// moves the pool, least of all down.
func holdWithinBounds(d Decision, p Params, why string) Decision {
	d.Desired = clamp(d.Current, p)
	switch {
	case d.Desired > d.Current:
		d.Action = ScaleUp
		d.Rationale = fmt.Sprintf("%s: %s, holding within bounds: raised to min_workers %d", d.Action, why, p.MinWorkers)
	case d.Desired < d.Current:
		d.Action = ScaleDown
		d.Rationale = fmt.Sprintf("%s: %s, holding within bounds: lowered to max_workers %d", d.Action, why, p.MaxWorkers)
	default:
		d.Rationale = "hold: " + why
	}
	return d
}

// clamp bounds n to [MinWorkers, MaxWorkers], the floor winning should the
// two ever cross.
func clamp(n int, p Params) int {
	return max(min(n, p.MaxWorkers), p.MinWorkers)
}

// record appends a recommendation and drops those no window can reach any
// more: a sample at or before now-longest fails every later cutoff test.
func (r *Recommender) record(now time.Time, raw int, longest time.Duration) {
	cutoff := now.Add(-longest)
	kept := r.history[:0]
	for _, s := range r.history {
		if s.at.After(cutoff) {
			kept = append(kept, s)
		}
	}
	r.history = kept
	if !now.After(cutoff) {
		return
	}
	// A run of equal recommendations needs only its latest: whatever
	// cutoff a window applies, if any of the run is after it, the latest
	// is. So the history grows with changes, not with ticks, however
	// often a pool ticks.
	if n := len(r.history); n > 0 && r.history[n-1].raw == raw {
		r.history[n-1].at = now
		return
	}
	r.history = append(r.history, sample{at: now, raw: raw})
}

func rationale(d Decision, notes []string) string {
	cpu := "-"
	if d.CPUUsed {
		cpu = strconv.Itoa(d.CPU)
	}
	lat := "-"
	if d.LatencyUsed {
		lat = strconv.Itoa(d.Latency)
	}
	s := fmt.Sprintf("%s: depth=%d busy=%d cpu=%s latency=%s overload=%t", d.Action, d.Depth, d.Busy, cpu, lat, d.Overloaded)
	if d.LittlesLawUsed {
		s += " littles-law=" + strconv.Itoa(d.LittlesLaw)
	}
	if d.OnsetUsed {
		s += " onset=" + strconv.Itoa(d.Onset)
	}
	if d.KeepWarmUsed {
		s += " keep-warm=" + strconv.Itoa(d.KeepWarm)
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, "; ") + ")"
	}
	return s
}
