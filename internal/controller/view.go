package controller

// The pool's read-only snapshot for `flexiq-scaled status` and `explain`.
// It is built at the end of every tick, under the pool's lock, from what the
// tick already read (no extra I/O but the workers' memory.current), and
// kept under a lock of its own, so that a status request never waits behind
// a slow tick: it reads the last tick's picture.

import (
	"slices"
	"sync"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// historyLen is how many decisions `explain` can show per pool.
const historyLen = 100

// viewState is the snapshot and the decisions' ring, under their own lock.
type viewState struct {
	mu   sync.Mutex
	v    api.View
	ring []api.Explanation // oldest first, at most historyLen
	// listed holds the workers as the last tick listed them: their memory
	// is read when the view is asked for, not at every tick, which at 500
	// workers would be 1,000 file reads per tick for nobody.
	listed []units.Worker
}

func (s *viewState) set(v api.View, e *api.Explanation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e != nil {
		if len(s.ring) == historyLen {
			s.ring = slices.Delete(s.ring, 0, 1)
		}
		s.ring = append(s.ring, *e)
		v.LastDecision = e
	} else {
		v.LastDecision = s.v.LastDecision
	}
	s.v = v
}

func (s *viewState) setMode(mode string, o api.Override) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v.Mode, s.v.Override = viewMode(mode, o)
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
	p.view.mu.Lock()
	defer p.view.mu.Unlock()
	v := p.view.v
	v.WorkerList = slices.Clone(v.WorkerList)
	mem, _ := p.units.(memoryReader)
	listed := make(map[string]units.Worker, len(p.view.listed))
	for _, w := range p.view.listed {
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
	if v.Pool == "" {
		v.Pool = p.name
	}
	return v
}

// Explain returns the pool's last n decisions, oldest first (all of those
// kept when n <= 0).
func (p *Pool) Explain(n int) []api.Explanation {
	p.view.mu.Lock()
	defer p.view.mu.Unlock()
	ring := p.view.ring
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

// buildView makes the snapshot at the end of a tick, under p.mu. listed is
// the tick's unit listing (nil when there was none); e the tick's
// explanation (nil when the tick decided nothing).
func (p *Pool) buildView(now time.Time, listed []units.Worker, e *api.Explanation) {
	wall := p.wallNow()
	v := api.View{
		Pool:   p.name,
		DryRun: p.dryRun(),
		Workers: api.WorkerCounts{
			Live: len(p.fleet.live), Draining: len(p.fleet.draining), Target: p.target,
			Min: p.cfg.MinWorkers, Max: p.cfg.MaxWorkers,
		},
		Source: api.SourceView{
			Type: p.cfg.Source.Type, Healthy: p.health.healthy, LastSuccess: p.health.lastSuccess,
			LastError: p.health.lastError, LastErrorAt: p.health.lastErrorAt,
		},
		UpdatedAt:  wall,
		WorkerList: make([]api.WorkerView, 0, len(p.fleet.live)+len(p.fleet.draining)),
	}
	v.Mode, v.Override = viewMode(p.modeString(wall), p.activeOverride(wall))
	if c := p.health.counts; c != nil {
		v.Queue = queueView(*c)
	}
	for _, w := range p.fleet.liveWorkers() {
		wv := api.WorkerView{Slot: w.slot, Unit: w.unit, State: "active", Restarts: p.restarts[w.slot]}
		if !w.since.IsZero() && now.After(w.since) {
			up := now.Sub(w.since).Seconds()
			wv.UptimeSec = &up
		}
		if w.utilKnown {
			pct := w.util * p.cfg.CPUPerWorker * 100
			wv.CPUPercent = &pct
		}
		v.WorkerList = append(v.WorkerList, wv)
	}
	for _, unit := range sortedKeys(p.fleet.draining) {
		d := p.fleet.draining[unit]
		v.WorkerList = append(v.WorkerList, api.WorkerView{Slot: d.slot, Unit: unit, State: "draining", Restarts: p.restarts[d.slot]})
	}
	p.view.set(v, e)
	p.view.mu.Lock()
	p.view.listed = listed
	p.view.mu.Unlock()
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

// activeOverride is the override in force at wall-clock now (a zero one if
// none, or if it has expired and the next tick has yet to say so).
func (p *Pool) activeOverride(now time.Time) api.Override {
	if p.override.Active(now) {
		return p.override
	}
	return api.Override{}
}
