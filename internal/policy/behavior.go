package policy

import (
	"fmt"
	"math"
	"time"
)

// Rate limits and cooldowns, applied after a decision (hpa or rules) and
// before the host guard. The policies are the Kubernetes HPA's `behavior`
// (pkg/controller/podautoscaler, calculateScaleUpLimitWithScalingRules and
// calculateScaleDownLimitWithBehaviors): each policy allows, over its
// period, a number of workers or a percentage of the count at the start of
// the period; `select` takes the policy that allows the most (max), the
// least (min), or none (disabled). The count at the start of a period is the
// current one less what was added within it plus what was removed, as the
// HPA computes it since it counts both directions' events.

// Limit types and selects, as written in the file.
const (
	LimitWorkers = "workers"
	LimitPercent = "percent"

	SelectMax      = "max"
	SelectMin      = "min"
	SelectDisabled = "disabled"
)

// RateLimit is one behaviour policy: at most Value workers (or percent) per
// Period.
type RateLimit struct {
	Type   string // LimitWorkers or LimitPercent
	Value  int
	Period time.Duration
}

// DirectionBehavior governs one direction.
type DirectionBehavior struct {
	// Select is SelectMax (the default when policies are given),
	// SelectMin or SelectDisabled.
	Select   string
	Policies []RateLimit
	// Cooldown is the least time from the last action in this direction
	// to the next one in it.
	Cooldown time.Duration
}

// Behavior is a pool's rate limits and cooldowns. The zero value limits
// nothing: today's behaviour.
type Behavior struct {
	// Cooldown is the least time from any scaling action to the next one,
	// in either direction: the n8n autoscaler's 90 s between decisions.
	Cooldown time.Duration
	Up, Down DirectionBehavior
}

// ScaleEvent is one recorded scaling action: Change workers (positive up,
// negative down) at At.
type ScaleEvent struct {
	At     time.Time
	Change int
}

// Limiter remembers a pool's recent scaling actions for its rate limits and
// cooldowns. The zero value is ready; the controller saves Events and
// restores them across a restart of the daemon, as it does the
// recommendation windows. Not safe for concurrent use.
type Limiter struct {
	events []ScaleEvent // oldest first
}

// Events returns the recorded actions, oldest first.
func (l *Limiter) Events() []ScaleEvent { return append([]ScaleEvent(nil), l.events...) }

// Restore replaces the recorded actions with events, dropping those after
// now (not from this clock) and those that changed nothing.
func (l *Limiter) Restore(now time.Time, events []ScaleEvent) {
	l.events = l.events[:0]
	for _, e := range events {
		if e.At.After(now) || e.Change == 0 {
			continue
		}
		l.events = append(l.events, e)
	}
}

// Record notes an action from current to desired workers at now, and drops
// the events that no limit or cooldown of b can reach any more.
func (l *Limiter) Record(now time.Time, b Behavior, current, desired int) {
	if desired != current {
		l.events = append(l.events, ScaleEvent{At: now, Change: desired - current})
	}
	longest := b.Longest()
	lastUp, lastDown := l.lastOf(true), l.lastOf(false)
	var kept []ScaleEvent
	for i, e := range l.events {
		// The last action in each direction is kept whatever its age:
		// cooldowns are measured from it, and a cooldown lengthened by a
		// reload must still see it.
		if now.Sub(e.At) < longest || i == lastUp || i == lastDown {
			kept = append(kept, e)
		}
	}
	l.events = kept
}

func (l *Limiter) lastOf(up bool) int {
	for i := len(l.events) - 1; i >= 0; i-- {
		if (l.events[i].Change > 0) == up {
			return i
		}
	}
	return -1
}

// Longest is how far back the behaviour looks: its longest period or
// cooldown.
func (b Behavior) Longest() time.Duration {
	d := max(b.Cooldown, b.Up.Cooldown, b.Down.Cooldown)
	for _, p := range append(append([]RateLimit(nil), b.Up.Policies...), b.Down.Policies...) {
		d = max(d, p.Period)
	}
	return d
}

// Limit bounds the decision d by b at now. Bounds win over limits:
// min_workers and max_workers are applied after them, as the HPA does, so
// a pool below its minimum still gets there at once. The returned note,
// when not empty, says which limit held.
func (l *Limiter) Limit(now time.Time, b Behavior, p Params, d Decision) (Decision, string) {
	c := d.Current
	if d.Desired == c || (d.Action != ScaleUp && d.Action != ScaleDown) {
		return d, ""
	}
	up := d.Desired > c
	dir, name := b.Down, "scale_down"
	if up {
		dir, name = b.Up, "scale_up"
	}
	target, note := d.Desired, ""
	var last, lastDir time.Time
	if n := len(l.events); n > 0 {
		last = l.events[n-1].At
	}
	if i := l.lastOf(up); i >= 0 {
		lastDir = l.events[i].At
	}
	switch {
	case b.Cooldown > 0 && !last.IsZero() && now.Sub(last) < b.Cooldown:
		target = c
		note = fmt.Sprintf("cooldown_sec %s: last action %s ago", secs(b.Cooldown), secs(now.Sub(last)))
	case dir.Cooldown > 0 && !lastDir.IsZero() && now.Sub(lastDir) < dir.Cooldown:
		target = c
		note = fmt.Sprintf("%s cooldown_sec %s: last %s %s ago", name, secs(dir.Cooldown), name, secs(now.Sub(lastDir)))
	case dir.Select == SelectDisabled:
		target = c
		note = name + " disabled"
	case len(dir.Policies) > 0:
		limit := l.periodLimit(now, c, up, dir)
		if (up && target > limit) || (!up && target < limit) {
			target = limit
			note = fmt.Sprintf("%s rate limit: %d", name, limit)
		}
	}
	if up {
		target = max(target, c)
	} else {
		target = min(target, c)
	}
	// Bounds win over limits.
	target = clamp(target, p)
	if target == d.Desired {
		return d, ""
	}
	asked := d.Desired
	d.Desired = target
	d.Action = actionOf(target, c)
	d.Rationale = fmt.Sprintf("%s: %d asked, held by %s; was: %s", d.Action, asked, note, d.Rationale)
	return d, note
}

// periodLimit is the HPA's limit for one direction: the furthest count the
// policies allow from current.
func (l *Limiter) periodLimit(now time.Time, current int, up bool, dir DirectionBehavior) int {
	pick := func(a, b int) int { return max(a, b) }
	if (dir.Select == SelectMin) == up {
		// Up, "min" takes the smallest count; down, the default "max"
		// (the biggest change) also takes the smallest count.
		pick = func(a, b int) int { return min(a, b) }
	}
	result := 0
	for i, pol := range dir.Policies {
		added, removed := 0, 0
		for _, e := range l.events {
			if now.Sub(e.At) < pol.Period {
				if e.Change > 0 {
					added += e.Change
				} else {
					removed -= e.Change
				}
			}
		}
		start := current - added + removed
		var proposed int
		switch {
		case up && pol.Type == LimitWorkers:
			proposed = start + pol.Value
		case up:
			// Rounded up, as the HPA does, so that a small pool can
			// grow at all.
			proposed = int(math.Ceil(float64(start) * (1 + float64(pol.Value)/100)))
		case pol.Type == LimitWorkers:
			proposed = start - pol.Value
		default:
			proposed = int(float64(start) * (1 - float64(pol.Value)/100))
		}
		if i == 0 {
			result = proposed
		} else {
			result = pick(result, proposed)
		}
	}
	return result
}

func secs(d time.Duration) string { return d.Round(time.Second).String() }

// actionOf is the action that takes c workers to target.
func actionOf(target, c int) Action {
	switch {
	case target > c:
		return ScaleUp
	case target < c:
		return ScaleDown
	}
	return Stable
}
