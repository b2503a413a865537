package controller

// What other goroutines read of a pool: status, explain, the metrics,
// STATUS= and the watchdog must never wait behind a tick, so the owner
// publishes an immutable snapshot after each tick and each operation, and
// readers load the last one. Nothing in a snapshot is changed once stored:
// the owner builds the next one in Pool.pub, whose slices it replaces,
// never writes into.

import (
	"slices"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// historyLen is how many decisions `explain` can show per pool.
const historyLen = 100

// published is what the owner shows readers; it is copied into each
// snapshot.
type published struct {
	status Status
	view   api.View
	ring   []api.Explanation // oldest first, at most historyLen
	// listed holds the workers as the last tick listed them: their memory
	// is read when the view is asked for, not at every tick, which at 500
	// workers would be 1,000 file reads per tick for nobody.
	listed []units.Worker
}

// snapshot is one published state of the pool.
type snapshot struct {
	published
	interval time.Duration
	override api.Override
}

// storeSnapshot publishes the pool's state; the owner calls it.
func (p *Pool) storeSnapshot() {
	p.noteWake()
	p.snap.Store(&snapshot{published: p.pub, interval: p.cfg.PollInterval, override: p.override})
}

// setView makes v the view, with e, when not nil, as its last decision.
func (s *published) setView(v api.View, e *api.Explanation) {
	if e != nil {
		ring := s.ring
		if len(ring) == historyLen {
			ring = ring[1:]
		}
		// Clipped, the append copies: the ring of a published snapshot
		// is never written into.
		s.ring = append(slices.Clip(ring), *e)
		v.LastDecision = e
	} else {
		v.LastDecision = s.view.LastDecision
	}
	s.view = v
}
