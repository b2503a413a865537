package controller

// The pool's view for `flexiq-scaled status` and `explain`, and its
// summary for STATUS=. The owner gathers its facts at the end of every
// tick and operation, from what the tick already read (no extra I/O but
// the workers' memory.current, read when asked), and publishes them on the
// pool's snapshot.Board (internal/controller/snapshot), so that a status
// request never waits behind a tick: it reads the last tick's picture.

import (
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/controller/snapshot"
	"github.com/flexiq/flexiq-scaled/internal/controller/workers"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// Status is a pool's one-line summary for STATUS= and for tests.
type Status = snapshot.Status

// View returns a copy of the pool's snapshot.
func (p *Pool) View() api.View {
	mem, _ := p.units.(snapshot.MemoryReader)
	return p.pub.View(p.wall(), mem)
}

// Explain returns the pool's last n decisions, oldest first (all of those
// kept when n <= 0).
func (p *Pool) Explain(n int) []api.Explanation { return p.pub.Explain(n) }

// sourceHealth is what the pool remembers of its source between ticks.
type sourceHealth struct {
	lastSuccess time.Time
	lastError   string
	lastErrorAt time.Time
	healthy     bool
	counts      *source.Counts
}

func (h *sourceHealth) record(now time.Time, c *source.Counts, err error) {
	switch {
	case c != nil:
		h.lastSuccess, h.healthy = now, true
		cc := *c
		h.counts = &cc
	case err != nil:
		h.lastError, h.lastErrorAt, h.healthy = err.Error(), now, false
	}
}

// facts are what the pool shows at now (the pool's clock), as its owner.
func (p *Pool) facts(now time.Time) snapshot.Facts {
	wall := p.wall()
	f := snapshot.Facts{
		Pool:     p.name,
		Wall:     wall,
		DryRun:   dryRun(p.cfg),
		Mode:     p.override.Mode(wall, dryRun(p.cfg)),
		Override: p.override.InForce(wall),
		Current:  p.workers.Live(),
		Workers: api.WorkerCounts{
			Live: len(p.workers.Slots.Live), Draining: p.workers.Draining(), Target: p.workers.Target,
			Min: p.cfg.MinWorkers, Max: p.cfg.MaxWorkers,
		},
		GroupSize: p.cfg.GroupSize(),
		NoQueue:   p.cfg.NoQueue(),
		Source: api.SourceView{
			Type: p.cfg.Source.Type, Healthy: p.health.healthy, LastSuccess: p.health.lastSuccess,
			LastError: p.health.lastError, LastErrorAt: p.health.lastErrorAt,
		},
		Counts:       p.health.counts,
		Degraded:     p.degraded.view(),
		Fleet:        p.dec.View(),
		FleetSummary: p.dec.Summary(),
		WorkerList:   workers.Views(p.workers, now, p.cfg.CPUPerWorker),
	}
	f.Workers.Starting, f.Workers.Stopping = p.workers.ActingCounts()
	if p.workers.Svc != nil {
		ready, notReady := p.workers.Svc.ReadyCount()
		f.Workers.Ready, f.Workers.NotReady = &ready, &notReady
	}
	return f
}
