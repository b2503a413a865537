package controller

import (
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
)

// sampleCPU updates each live worker's utilisation over the last tick (at
// least half a poll interval):
// Δusage / Δwall / cpu_per_worker. A worker needs two samples of the same
// invocation, a full tick apart, before it counts.
func (p *Pool) sampleCPU(now time.Time, listed []units.Worker) {
	byUnit := map[string]units.Worker{}
	for _, w := range listed {
		byUnit[w.Unit] = w
	}
	for _, lw := range p.fleet.live {
		// A tick brought forward by a wake-up comes a fraction of an
		// interval after the last: a utilisation over a few hundred
		// milliseconds is noise, so the last one stands.
		if lw.havePrev && now.Sub(lw.prevAt) < p.cfg.PollInterval/2 {
			continue
		}
		lw.util, lw.utilKnown = 0, false
		w, ok := byUnit[lw.unit]
		if !ok {
			lw.havePrev = false
			continue
		}
		usage, err := p.units.CPUUsage(w)
		if err != nil {
			lw.havePrev = false
			continue
		}
		if lw.havePrev && lw.invocation == w.InvocationID && now.After(lw.prevAt) {
			lw.util = float64(usage-lw.prevUsage) / float64(now.Sub(lw.prevAt)) / p.cfg.CPUPerWorker
			lw.utilKnown = true
		}
		lw.prevUsage, lw.prevAt, lw.havePrev = usage, now, true
		lw.invocation = w.InvocationID
	}
}

func (p *Pool) meanUtil() (float64, bool) {
	var sum float64
	n := 0
	for _, w := range p.fleet.live {
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
