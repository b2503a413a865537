package controller

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/capacity"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/acting"
	"github.com/flexiq/flexiq-scaled/internal/controller/admit"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// workers is the pool's side that acts: its slots (internal/slots), the starts
// and stops over Units (act.go), the backoff and the choice of victims, the
// quiet phase (quiet.go), what holds a start back (readiness.go) and the
// rollout (rollout.go). It decides nothing: the pool's tick tells it what
// to reach, after the decision, through
//
//	reconcile      take in a listing of the units: crashes, stops, adoptions
//	quietStep      stop the quiet workers whose quiet period is over
//	replaceCrashed start crashed workers again, up to the target
//	scaleTo        follow a decision: start or drain to its count
//	rolloutStep    replace up to max_surge workers of an old revision
//	stopAll        one round of a drain of the whole pool
//
// It is the pool's, owned by the pool's loop as the rest of its state.
type workers struct {
	name  string
	units Units
	jobs  *acting.Runner // the calls to systemd, off the loop (package acting)
	// dropLogged: the starts dropped unsent since the last start was
	// emitted have been logged (acting.go).
	dropLogged bool
	log        *eventlog.Logger
	report     *reporter // the pool's, shared with the decision's entries
	ledger     *capacity.Ledger
	quietFile  quietFile // quiet-POOL.json, where the quiet phase survives a restart
	kick       func()    // wakes the pool's loop when a quiet phase ends

	// cfg is the pool's configuration; a reload replaces it (Pool.update).
	cfg   *config.Pool
	slots *slotTable
	// target is the last decided count; crashed workers are replaced up to
	// it.
	target int
	roll   rollout
	// stopping is set by Drain: the pool no longer scales or replaces.
	stopping bool
	ready    *admit.Gate           // readiness.go
	quiet    map[string]*quietUnit // quiet.go: workers in their quiet phase
	restarts map[int]int           // crashes by slot, for status
	svc      *service              // a service pool's (service.go); nil for queue workers
	gang     gangDeps              // gang.go: free ports, the CPUs to split
}

func newWorkers(p *Pool) *workers {
	return &workers{
		name:      p.name,
		units:     p.units,
		jobs:      p.acting,
		log:       p.log,
		report:    &p.report,
		ledger:    p.opts.Ledger,
		quietFile: newQuietFile(p.name, p.opts.StateDir),
		kick:      p.wake.kick,
		cfg:       p.cfg,
		slots:     newSlotTable(),
		restarts:  map[int]int{},
		gang:      defaultGangDeps(),
	}
}

// reconcile brings the slot table in line with a listing of the pool's units,
// reports what changed by itself and clears the failed units.
func (ws *workers) reconcile(ctx context.Context, now time.Time, listed []units.Worker) reconciled {
	r := ws.slots.Reconcile(now, listed)
	ws.apply(ctx, now, r)
	ws.svc.replicasReconciled(now, listed, r)
	ws.svc.guardRound(now)
	return r
}

// replaceCrashed starts the workers that crashed, up to the last decided
// target. A worker stopped from outside (an admin's systemctl stop, in r)
// is a scale-down by hand, not a crash: replacing it at once would only
// start a worker that the decision may drain again. The policy decides
// whether the pool needs it back (min_workers, demand).
func (ws *workers) replaceCrashed(ctx context.Context, now time.Time, r reconciled) {
	ws.target = max(0, ws.target-len(r.Stopping))
	ws.startUpTo(ctx, now, ws.target, "replacing crashed worker")
}

// scaleTo follows the decision d: its count becomes the target, and
// workers are started or drained to reach it.
func (ws *workers) scaleTo(ctx context.Context, now time.Time, d policy.Decision) {
	switch d.Action {
	case policy.ScaleUp:
		ws.target = d.Desired
		ws.startUpTo(ctx, now, d.Desired, "scale-up")
	case policy.ScaleDown:
		ws.target = d.Desired
		ws.drainDownTo(ctx, now, d.Desired)
	case policy.Stable:
		ws.target = d.Desired
	}
}

// stopAll is one round of a drain of the whole pool, on a fresh listing:
// every quiet phase is cut short and every live worker stopped.
func (ws *workers) stopAll(ctx context.Context, now time.Time, listed []units.Worker, why string) {
	ws.reconcile(ctx, now, listed)
	if ws.svc != nil {
		// Replicas leave discovery and serve out their drain periods,
		// as on a scale-down.
		ws.svc.pumpService(ctx, now)
		for _, w := range ws.slots.LiveWorkers() {
			ws.retire(ctx, now, w, why)
		}
		ws.svc.publishReady(ctx, now)
		ws.quietStep(ctx, now)
		return
	}
	ws.endQuiet(ctx, now)
	for _, w := range ws.slots.LiveWorkers() {
		ws.stopWorker(ctx, w, why)
	}
}

// live and draining count the workers as of the last listing and the
// starts and stops since; live counts the starts in flight too: they are
// what the pool has asked for, never to be decided again.
func (ws *workers) live() int     { return len(ws.slots.Live) + len(ws.slots.Starting) }
func (ws *workers) draining() int { return ws.slots.DrainingSlots() }

// list lists the pool's units, for an owner outside the loop (Drain).
func (ws *workers) list(ctx context.Context) ([]units.Worker, error) {
	l := ws.listPlan().list(ctx)
	if l.err == nil {
		ws.ready.RequiredRead(ws.cfg, l.required, l.reqErr)
	}
	return l.workers, l.err
}

func (ws *workers) workerFields(slot int, unit string, extra eventlog.Fields) eventlog.Fields {
	return ws.report.workerFields(slot, unit, extra)
}
