package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The host guard is the n8n autoscaler's design: host CPU smoothed with an
// asymmetric EWMA, scale-up only with headroom, and an emergency scale-down
// of one worker per cooldown when the host is saturated. It is per host,
// shared by every pool; the controller samples the host and keeps the EWMA,
// this file only judges.

// GuardParams are the [host_guard] knobs. Fractions of the whole host (all
// cores); PSI values are percentages as the kernel prints them; memory in
// bytes. A zero threshold turns that guard off.
type GuardParams struct {
	CPUScaleUpMax     float64 // host_cpu_scale_up_max: no scale-up at or above (EWMA or raw)
	CPUEmergency      float64 // host_cpu_emergency: emergency above max(EWMA, raw)
	AlphaUp           float64 // alpha_up: weight of a raw reading above the average
	AlphaDown         float64 // alpha_down: weight of a raw reading below it
	EmergencyCooldown time.Duration

	PSICPUMax             float64 // psi_cpu_max: no scale-up at or above cpu "some avg10"
	PSIMemoryMax          float64 // psi_memory_max
	PSICPUEmergency       float64 // psi_cpu_emergency: emergency above
	PSIMemoryEmergency    float64 // psi_memory_emergency
	MemAvailableMin       uint64  // mem_available_min: no scale-up below
	MemAvailableEmergency uint64  // mem_available_emergency: emergency below
}

// DefaultGuardParams are the n8n autoscaler's defaults.
func DefaultGuardParams() GuardParams {
	return GuardParams{
		CPUScaleUpMax:     0.65,
		CPUEmergency:      0.88,
		AlphaUp:           0.5,
		AlphaDown:         0.1,
		EmergencyCooldown: 90 * time.Second,
	}
}

// HostReading is one sample of the host. A guard whose reading is not known
// neither blocks nor forces anything: a kernel without PSI must not freeze
// every pool.
type HostReading struct {
	CPU      float64 // busy fraction of all cores over the last interval
	CPUKnown bool
	// PSI "some avg10", in percent.
	PSICPU, PSIMemory float64
	PSIKnown          bool
	MemAvailable      uint64 // bytes
	MemKnown          bool
}

// EWMA is the asymmetric exponentially weighted moving average of host CPU:
// quick to believe a rise (alpha_up), slow to believe a fall (alpha_down),
// so that one quiet second does not open the door to a scale-up. The zero
// value has seen nothing; its first reading becomes the average.
type EWMA struct {
	Value  float64
	Primed bool
}

// Update folds raw into the average and returns it.
func (e *EWMA) Update(raw, alphaUp, alphaDown float64) float64 {
	if !e.Primed {
		e.Value, e.Primed = raw, true
		return e.Value
	}
	a := alphaDown
	if raw > e.Value {
		a = alphaUp
	}
	e.Value += a * (raw - e.Value)
	return e.Value
}

// HostState is what the guard judges: the latest reading and the EWMA of
// host CPU up to and including it.
type HostState struct {
	Reading HostReading
	EMA     float64
}

// Effective is max(EWMA, raw): a spike counts at once, a fall only as the
// average follows it.
func (h HostState) Effective() float64 { return max(h.EMA, h.Reading.CPU) }

// String is the readings as the journal shows them.
func (h HostState) String() string {
	var parts []string
	if h.Reading.CPUKnown {
		parts = append(parts, fmt.Sprintf("host_cpu=%.2f host_cpu_ema=%.2f", h.Reading.CPU, h.EMA))
	} else {
		parts = append(parts, "host_cpu=unknown")
	}
	if h.Reading.PSIKnown {
		parts = append(parts, fmt.Sprintf("psi_cpu=%.1f psi_memory=%.1f", h.Reading.PSICPU, h.Reading.PSIMemory))
	}
	if h.Reading.MemKnown {
		parts = append(parts, fmt.Sprintf("mem_available=%dMiB", h.Reading.MemAvailable>>20))
	}
	return strings.Join(parts, " ")
}

// Verdict is the guard's judgement of the host at one sample.
type Verdict struct {
	BlockUp   bool     // no pool may scale up (beyond its min_workers)
	Emergency bool     // one worker is to go, per emergency cooldown
	Reasons   []string // every threshold crossed, with the reading
	Host      HostState
}

// Judge compares the host with the thresholds.
func Judge(p GuardParams, h HostState) Verdict {
	v := Verdict{Host: h}
	r := h.Reading
	block := func(format string, args ...any) {
		v.BlockUp = true
		v.Reasons = append(v.Reasons, fmt.Sprintf(format, args...))
	}
	emergency := func(format string, args ...any) {
		v.Emergency, v.BlockUp = true, true
		v.Reasons = append(v.Reasons, fmt.Sprintf(format, args...))
	}
	if r.CPUKnown {
		switch eff := h.Effective(); {
		case p.CPUEmergency > 0 && eff > p.CPUEmergency:
			emergency("host cpu %.2f > host_cpu_emergency %.2f", eff, p.CPUEmergency)
		case p.CPUScaleUpMax > 0 && r.CPU >= p.CPUScaleUpMax:
			block("host cpu %.2f >= host_cpu_scale_up_max %.2f", r.CPU, p.CPUScaleUpMax)
		case p.CPUScaleUpMax > 0 && h.EMA >= p.CPUScaleUpMax:
			block("host cpu average %.2f >= host_cpu_scale_up_max %.2f", h.EMA, p.CPUScaleUpMax)
		}
	}
	if r.PSIKnown {
		for _, g := range []struct {
			name            string
			val, max, emerg float64
		}{
			{"psi_cpu", r.PSICPU, p.PSICPUMax, p.PSICPUEmergency},
			{"psi_memory", r.PSIMemory, p.PSIMemoryMax, p.PSIMemoryEmergency},
		} {
			switch {
			case g.emerg > 0 && g.val > g.emerg:
				emergency("%s %.1f > %s_emergency %.1f", g.name, g.val, g.name, g.emerg)
			case g.max > 0 && g.val >= g.max:
				block("%s %.1f >= %s_max %.1f", g.name, g.val, g.name, g.max)
			}
		}
	}
	if r.MemKnown {
		switch {
		case p.MemAvailableEmergency > 0 && r.MemAvailable < p.MemAvailableEmergency:
			emergency("mem_available %dMiB < mem_available_emergency %dMiB", r.MemAvailable>>20, p.MemAvailableEmergency>>20)
		case p.MemAvailableMin > 0 && r.MemAvailable < p.MemAvailableMin:
			block("mem_available %dMiB < mem_available_min %dMiB", r.MemAvailable>>20, p.MemAvailableMin>>20)
		}
	}
	return v
}

// PoolLoad is what the guard knows of a pool when it picks the one to give
// up a worker in an emergency.
type PoolLoad struct {
	Name     string
	Priority int
	Live     int // live workers, draining ones not counted
	Min      int // min_workers
}

// VictimPool picks the pool that gives up a worker: the lowest priority first;
// among equals, the pool with the most workers above its minimum; then by
// name, so that the choice is the same on every run. A pool at its minimum
// is never picked. ok is false when every pool is at its minimum.
func VictimPool(pools []PoolLoad) (name string, ok bool) {
	var cands []PoolLoad
	for _, p := range pools {
		if p.Live > p.Min {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return "", false
	}
	slices.SortFunc(cands, func(a, b PoolLoad) int {
		return cmp.Or(
			cmp.Compare(a.Priority, b.Priority),
			cmp.Compare(b.Live-b.Min, a.Live-a.Min),
			cmp.Compare(a.Name, b.Name),
		)
	})
	return cands[0].Name, true
}

// EmergencyDue says whether an emergency scale-down may happen at now, the
// last one having been at last (zero: never).
func EmergencyDue(now, last time.Time, cooldown time.Duration) bool {
	return last.IsZero() || now.Sub(last) >= cooldown
}

// GuardOutcome is what the guard did to one pool's decision.
type GuardOutcome string

const (
	GuardNone    GuardOutcome = ""
	GuardBlocked GuardOutcome = "blocked" // a scale-up held at the current count
	GuardForced  GuardOutcome = "forced"  // an emergency scale-down
)

// ApplyGuard applies the verdict to one pool's decision d. victim and due
// say whether this pool is the one to give up a worker now (see Victim and
// EmergencyDue). A scale-up is held at the current count, except up to
// min_workers, which is the pool's baseline whatever the host; an emergency
// takes one worker from the victim, never below min_workers, and overrides
// whatever the pool decided.
func ApplyGuard(d Decision, p Params, v Verdict, victim, due bool) (Decision, GuardOutcome) {
	why := strings.Join(v.Reasons, ", ")
	if v.Emergency && victim && due && d.Current > p.MinWorkers && !(d.Action == ScaleDown && d.Desired < d.Current) {
		// A pool already scaling down goes its own way. Missing queue
		// data does not stop an emergency: the host is what is failing,
		// not the queue.
		was := d.Rationale
		d.Desired, d.Action = d.Current-1, ScaleDown
		d.Rationale = fmt.Sprintf("scale-down: host guard emergency (%s): one worker per emergency cooldown; was: %s", why, was)
		return d, GuardForced
	}
	if v.BlockUp && d.Action == ScaleUp {
		floor := max(d.Current, min(p.MinWorkers, p.MaxWorkers))
		if d.Desired > floor {
			asked := d.Desired
			d.Desired = floor
			d.Action = actionOf(floor, d.Current)
			d.Rationale = fmt.Sprintf("%s: scale-up to %d held by the host guard (%s); was: %s", d.Action, asked, why, d.Rationale)
			return d, GuardBlocked
		}
	}
	return d, GuardNone
}
