// Package snapshot is what other goroutines read of a pool: status,
// explain, the metrics, STATUS= and the watchdog must never wait behind a
// tick, so the pool's owner (its loop) publishes an immutable snapshot after
// each tick and each operation, and readers load the last one. Nothing in a
// snapshot is changed once stored: the owner builds the next one in the
// Board, whose slices it replaces, never writes into.
//
// The owner hands the Board the Facts it gathered (what the pool is doing,
// which only the owner may read); the Board turns them into the summary
// (Status), the view (api.View, for status and explain) and the tick's
// report (TickReport, for the metrics).
package snapshot

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// historyLen is how many decisions `explain` can show per pool.
const historyLen = 100

// published is one state of the pool as readers see it.
type published struct {
	status   Status
	view     api.View
	ring     []api.Explanation // oldest first, at most historyLen
	interval time.Duration
	override api.Override
	// listed holds the workers as the last tick listed them: their memory
	// is read when the view is asked for, not at every tick, which at 500
	// workers would be 1,000 file reads per tick for nobody.
	listed []units.Worker
}

// Board is a pool's published state. The owner changes the next snapshot
// (Publish, SetMode, Reconfigured) and stores it (Store); any goroutine
// reads the last one stored (Status, Interval, Override, View, Explain)
// without waiting for the owner.
type Board struct {
	next published // the owner's alone
	cur  atomic.Pointer[published]
}

// New is the board of a pool whose summary is st, ticking every interval,
// with that first state stored.
func New(st Status, interval time.Duration) *Board {
	b := &Board{next: published{status: st, interval: interval}}
	b.Store()
	return b
}

// Store publishes the next state; the owner calls it.
func (b *Board) Store() {
	p := b.next
	b.cur.Store(&p)
}

// SetMode brings the summary's and the view's mode to an override's
// change: mode as status shows it, o the override as set.
func (b *Board) SetMode(mode string, o api.Override) {
	b.next.status.Mode = mode
	b.next.override = o
	b.next.view.Mode, b.next.view.Override = viewMode(mode, o)
}

// Reconfigured brings the summary to a reload: the view follows at the
// next tick.
func (b *Board) Reconfigured(interval time.Duration, maxWorkers int, mode string) {
	b.next.interval = interval
	b.next.status.Max = maxWorkers
	b.next.status.Mode = mode
}

// Listed is the unit listing the next view is of.
func (b *Board) Listed() []units.Worker { return b.next.listed }

func viewMode(mode string, o api.Override) (string, *api.Override) {
	if o.Kind == api.OverrideNone {
		if mode == "dry-run" {
			return "dry-run", nil
		}
		return "active", nil
	}
	return o.Kind, &o
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

// Status is the pool's summary as last published.
func (b *Board) Status() Status { return b.cur.Load().status }

// Interval is the pool's tick interval as last published.
func (b *Board) Interval() time.Duration { return b.cur.Load().interval }

// Override is the pool's override as last published.
func (b *Board) Override() api.Override { return b.cur.Load().override }

// MemoryReader is the optional part of the pool's Units that reads a
// worker's memory (*units.Manager has it; the tests' fake need not).
type MemoryReader interface {
	MemoryUsage(units.Worker) (usage, limit uint64, limitSet bool, err error)
}

// View returns a copy of the last published view, its uptimes brought to
// wall-clock now and, with mem, the live workers' memory read now.
func (b *Board) View(now time.Time, mem MemoryReader) api.View {
	snap := b.cur.Load()
	v := snap.view
	v.WorkerList = slices.Clone(v.WorkerList)
	listed := make(map[string]units.Worker, len(snap.listed))
	for _, w := range snap.listed {
		listed[w.Unit] = w
	}
	// Uptimes are as of the last tick: brought to now.
	since := now.Sub(v.UpdatedAt)
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
		v.Pool = snap.status.Name
	}
	return v
}

// Explain returns the pool's last n decisions, oldest first (all of those
// kept when n <= 0).
func (b *Board) Explain(n int) []api.Explanation {
	ring := b.cur.Load().ring
	if n > 0 && n < len(ring) {
		ring = ring[len(ring)-n:]
	}
	out := make([]api.Explanation, len(ring))
	for i, e := range ring {
		out[i] = e.Clone()
	}
	return out
}
