package workers

import (
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// idleCPUWindow is how far apart a worker's CPU samples are when the pool's
// policy does not scale on them: its utilisation then only picks the
// idlest workers to stop first and shows in `status`, for which a
// utilisation over half a minute is the better measure anyway, and a pool
// of 500 workers saves 500 cgroup reads on most ticks (docs/performance.md).
const idleCPUWindow = 30 * time.Second

// cpuWindow is the least time between two CPU samples of a worker: half a
// poll interval for a pool whose policy scales on its workers' CPU
// (target_cpu_utilisation, or rules, which may use worker_cpu), else
// idleCPUWindow.
func cpuWindow(cfg *config.Pool) time.Duration {
	w := cfg.PollInterval / 2
	if cfg.TargetCPUUtilisation > 0 || cfg.Scaling.Policy == config.PolicyRules {
		return w
	}
	return max(w, idleCPUWindow)
}

// SampleCPU updates each live worker's utilisation over the last sampling
// window (cpuWindow): Δusage / Δwall / cpu_per_worker. A worker needs two
// samples of the same invocation, a window apart, before it counts; between
// samples its last utilisation stands.
func SampleCPU(u Units, cfg *config.Pool, t *SlotTable, now time.Time, listed []units.Worker) {
	window := cpuWindow(cfg)
	byUnit := indexByUnit(listed)
	for _, lw := range t.Live {
		// A tick brought forward by a wake-up comes a fraction of an
		// interval after the last: a utilisation over a few hundred
		// milliseconds is noise, so the last one stands.
		if lw.havePrev && now.Sub(lw.prevAt) < window {
			continue
		}
		lw.util, lw.utilKnown = 0, false
		w, ok := byUnit.Get(lw.unit)
		if !ok {
			lw.havePrev = false
			continue
		}
		usage, err := u.CPUUsage(w)
		if err != nil {
			lw.havePrev = false
			continue
		}
		if lw.havePrev && lw.invocation == w.InvocationID && now.After(lw.prevAt) {
			lw.util = float64(usage-lw.prevUsage) / float64(now.Sub(lw.prevAt)) / cfg.CPUPerWorker
			lw.utilKnown = true
		}
		lw.prevUsage, lw.prevAt, lw.havePrev = usage, now, true
		lw.invocation = w.InvocationID
	}
}

// MeanUtil is the mean utilisation of t's live workers that have one.
func MeanUtil(t *SlotTable) (float64, bool) {
	var sum float64
	n := 0
	for _, w := range t.Live {
		if w.utilKnown {
			sum += w.util
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}
