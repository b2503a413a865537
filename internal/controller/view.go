package controller

// The pool's view for `flexiq-scaled status` and `explain`, and its
// summary for STATUS=. The owner gathers its facts at the end of every
// tick and operation, from what the tick already read (no extra I/O but
// the workers' memory.current, read when asked), and publishes them on the
// pool's snapshot.Board (internal/controller/snapshot), so that a status
// request never waits behind a tick: it reads the last tick's picture.

import (
	"maps"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/controller/snapshot"
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
		Current:  p.workers.live(),
		Workers: api.WorkerCounts{
			Live: len(p.workers.slots.Live), Draining: p.workers.draining(), Target: p.workers.target,
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
		WorkerList:   workerViews(p.workers, now, p.cfg.CPUPerWorker),
	}
	f.Workers.Starting, f.Workers.Stopping = p.workers.actingCounts()
	if p.workers.svc != nil {
		ready, notReady := p.workers.svc.readyCount()
		f.Workers.Ready, f.Workers.NotReady = &ready, &notReady
	}
	return f
}

// workerViews are the pool's workers as status shows them: the live ones,
// then the draining ones.
func workerViews(ws *workers, now time.Time, cpuPerWorker float64) []api.WorkerView {
	out := make([]api.WorkerView, 0, ws.live()+ws.draining())
	for _, w := range ws.slots.LiveWorkers() {
		wv := api.WorkerView{Slot: w.slot, Unit: w.unit, State: "active", Restarts: ws.restarts[w.slot]}
		if !w.since.IsZero() && now.After(w.since) {
			up := now.Sub(w.since).Seconds()
			wv.UptimeSec = &up
		}
		if ws.svc != nil {
			wv.Readiness, wv.Ports = w.rd.String(), maps.Clone(w.ports)
		}
		if w.utilKnown {
			pct := w.util * cpuPerWorker * 100
			wv.CPUPercent = &pct
		}
		out = append(out, wv)
	}
	for _, unit := range sortedKeys(ws.slots.Draining) {
		d := ws.slots.Draining[unit]
		out = append(out, api.WorkerView{Slot: d.Slot, Unit: unit, State: "draining", Restarts: ws.restarts[d.Slot]})
	}
	return out
}
