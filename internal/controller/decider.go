package controller

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/controller/decide"
	"github.com/flexiq/flexiq-scaled/internal/controller/snapshot"
	"github.com/flexiq/flexiq-scaled/internal/controller/workers"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// The decision is package decide's: a Decider, local or a fleet's, which
// the tick asks without knowing which. These are the daemon's names for
// its host guard, which the decision judges by.
type HostGuard = decide.HostGuard

// NewHostGuard makes the daemon's guard (decide.NewHostGuard).
var NewHostGuard = decide.NewHostGuard

// deciderOptions are the decider's ties to the daemon, of the pool's.
func deciderOptions(log *eventlog.Logger, o Options) decide.Options {
	return decide.Options{Log: log, Guard: o.Guard, NewPromQL: o.NewPromQL, OpenFleetStore: o.OpenFleetStore}
}

// deciderHooks is what the pool's decider asks of it (decide.Pool); the
// decider runs on the pool's owner, so these do too.
type deciderHooks struct{ p *Pool }

func (h deciderHooks) Live() int     { return h.p.workers.Live() }
func (h deciderHooks) Draining() int { return h.p.workers.Draining() }

// Starting counts a service pool's replicas started and not ready yet.
func (h deciderHooks) Starting() int {
	if h.p.workers.Svc == nil {
		return 0
	}
	_, starting := h.p.workers.Svc.ReadyCount()
	return starting
}

// Holds: a pool the operator holds (pause, pin) or that only logs
// (dry-run) does not act on its decision.
func (h deciderHooks) Holds() bool {
	return dryRun(h.p.cfg) || h.p.override.Active(h.p.wall())
}

func (h deciderHooks) Wall() time.Time { return h.p.wall() }

// Observed takes the source's reading of this tick: kept for the tick's
// report, its failures logged without flooding.
func (h deciderHooks) Observed(now time.Time, read decide.Observed) (source.Counts, error) {
	p := h.p
	p.lastObs = snapshot.Observation{Counts: read.Counts, Valid: read.Err == nil, Err: read.Err}
	if read.Err != nil {
		p.report.sourceFailed(now, read.Err, p.workers.Live())
		return read.Counts, read.Err
	}
	p.report.sourceOK(read.Counts)
	return read.Counts, nil
}

func (h deciderHooks) Threads(r decide.ThreadsRead) int {
	return h.p.threads.perWorker(h.p.cfg, h.p.log, r)
}
func (h deciderHooks) MeanUtil() (float64, bool) { return workers.MeanUtil(h.p.workers.Slots) }
func (h deciderHooks) Kick()                     { h.p.wake.kick() }

// Resign hands a fleet pool's lease to another host at once (a restart,
// which keeps the workers); the pool coordinates no more, and decides on
// its own from then on. A pool that is not in a fleet does nothing.
func (p *Pool) Resign() {
	var dec decide.Decider
	p.do(func() {
		dec = p.dec
		p.dec = dec.Memory()
		p.flWake.Store(nil)
	})
	dec.Stop(decide.StopRestart)
}

// WithFleetMembers completes a follower's fleet section in v with the
// other hosts' live counts and capacities (decide.Fleet.Members); a pool
// outside a fleet gives v back as it was. Any goroutine.
func (p *Pool) WithFleetMembers(ctx context.Context, v api.View) api.View {
	fl := p.flWake.Load()
	if fl == nil {
		return v
	}
	return fl.Members(ctx, v)
}

// fleetWake is a source's wake-up: a tick now (kick) and, when this host
// leads its fleet, the fleet's decision now (a follower's coordinator has
// nothing to decide: it is not woken, which would cost store calls).
func fleetWake(kick func(), fl *atomic.Pointer[decide.Fleet]) func() {
	return func() {
		kick()
		if l := fl.Load(); l != nil {
			l.WakeLeader()
		}
	}
}
