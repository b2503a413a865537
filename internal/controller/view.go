package controller

// The pool's view for `flexiq-scaled status` and `explain`. It is built at
// the end of every tick, by the pool's owner, from what the tick already
// read (no extra I/O but the workers' memory.current, read when asked), and
// published in the pool's snapshot (snapshot.go), so that a status request
// never waits behind a tick: it reads the last tick's picture.

import (
	"maps"
	"slices"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// setMode brings the summary's and the view's mode to an override's change.
func (s *published) setMode(mode string, o api.Override) {
	s.status.Mode = mode
	s.view.Mode, s.view.Override = viewMode(mode, o)
}

func viewMode(mode string, o api.Override) (string, *api.Override) {
	if o.Kind == api.OverrideNone {
		if mode == "dry-run" {
			return "dry-run", nil
		}
		return "active", nil
	}
	return o.Kind, &o
}

// View returns a copy of the pool's snapshot.
func (p *Pool) View() api.View {
	snap := p.snap.Load()
	v := snap.view
	v.WorkerList = slices.Clone(v.WorkerList)
	mem, _ := p.units.(memoryReader)
	listed := make(map[string]units.Worker, len(snap.listed))
	for _, w := range snap.listed {
		listed[w.Unit] = w
	}
	// Uptimes are as of the last tick: brought to now.
	since := p.wallNow().Sub(v.UpdatedAt)
	for i, w := range v.WorkerList {
		if w.UptimeSec != nil && !v.UpdatedAt.IsZero() && since > 0 {
			up := *w.UptimeSec + since.Seconds()
			v.WorkerList[i].UptimeSec = &up
		}
		// Memory as of now, for the live workers the last tick listed.
		if lw, ok := listed[w.Unit]; ok && mem != nil && w.State == "active" {
			if b, _, _, err := mem.MemoryUsage(lw); err == nil {
				v.WorkerList[i].MemoryBytes = &b
			}
		}
	}
	if v.LastDecision != nil {
		e := v.LastDecision.Clone()
		v.LastDecision = &e
	}
	if v.Queue != nil {
		q := *v.Queue
		v.Queue = &q
	}
	if v.Override != nil {
		o := *v.Override
		v.Override = &o
	}
	if v.Degraded != nil {
		dg := *v.Degraded
		v.Degraded = &dg
	}
	if v.Pool == "" {
		v.Pool = p.name
	}
	return v
}

// Explain returns the pool's last n decisions, oldest first (all of those
// kept when n <= 0).
func (p *Pool) Explain(n int) []api.Explanation {
	ring := p.snap.Load().ring
	if n > 0 && n < len(ring) {
		ring = ring[len(ring)-n:]
	}
	out := make([]api.Explanation, len(ring))
	for i, e := range ring {
		out[i] = e.Clone()
	}
	return out
}

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

// memoryReader is the optional part of Units that reads a worker's memory
// (*units.Manager has it; the tests' fake need not).
type memoryReader interface {
	MemoryUsage(units.Worker) (usage, limit uint64, limitSet bool, err error)
}

// buildView makes the view at the end of a tick, as the pool's owner. listed is
// the tick's unit listing (nil when there was none); e the tick's
// explanation (nil when the tick decided nothing).
func (p *Pool) buildView(now time.Time, listed []units.Worker, e *api.Explanation) {
	wall := p.wallNow()
	v := api.View{
		Pool:   p.name,
		DryRun: p.dryRun(),
		Workers: api.WorkerCounts{
			Live: len(p.workers.fleet.live), Draining: p.workers.draining(), Target: p.workers.target,
			Min: p.cfg.MinWorkers, Max: p.cfg.MaxWorkers,
		},
		Source: api.SourceView{
			Type: p.cfg.Source.Type, Healthy: p.health.healthy, LastSuccess: p.health.lastSuccess,
			LastError: p.health.lastError, LastErrorAt: p.health.lastErrorAt,
		},
		Degraded:   p.degradedView(),
		Fleet:      p.fleetView(),
		UpdatedAt:  wall,
		WorkerList: make([]api.WorkerView, 0, p.workers.live()+p.workers.draining()),
	}
	v.Workers.Starting, v.Workers.Stopping = p.workers.actingCounts()
	if p.workers.svc != nil {
		ready, notReady := p.workers.readyCount()
		v.Workers.Ready, v.Workers.NotReady = &ready, &notReady
	}
	if n := p.cfg.GroupSize(); n > 1 {
		v.Workers.GroupSize = n
	}
	v.Mode, v.Override = viewMode(p.override.Mode(wall, p.dryRun()), p.override.InForce(wall))
	if c := p.health.counts; c != nil && !p.cfg.NoQueue() {
		v.Queue = queueView(*c)
	}
	for _, w := range p.workers.fleet.liveWorkers() {
		wv := api.WorkerView{Slot: w.slot, Unit: w.unit, State: "active", Restarts: p.workers.restarts[w.slot]}
		if !w.since.IsZero() && now.After(w.since) {
			up := now.Sub(w.since).Seconds()
			wv.UptimeSec = &up
		}
		if p.workers.svc != nil {
			wv.Readiness, wv.Ports = w.rd.String(), maps.Clone(w.ports)
		}
		if w.utilKnown {
			pct := w.util * p.cfg.CPUPerWorker * 100
			wv.CPUPercent = &pct
		}
		v.WorkerList = append(v.WorkerList, wv)
	}
	for _, unit := range sortedKeys(p.workers.fleet.draining) {
		d := p.workers.fleet.draining[unit]
		v.WorkerList = append(v.WorkerList, api.WorkerView{Slot: d.slot, Unit: unit, State: "draining", Restarts: p.workers.restarts[d.slot]})
	}
	p.pub.setView(v, e)
	p.pub.listed = listed
}

// queueView is a source's reading as status and the metrics show it.
func queueView(c source.Counts) *api.QueueView {
	q := &api.QueueView{Pending: c.Pending, Running: c.Running, Paused: c.Paused}
	if c.HasOldest {
		age := c.OldestAge.Seconds()
		q.OldestAgeSec = &age
	}
	return q
}
