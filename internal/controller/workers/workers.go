// Package workers is a pool's side that owns its units (issue 28): the
// slot table, the starts and stops over systemd and their backoff, the
// choice of victims, the quiet phase, what holds a start back, the
// rollout, a service pool's replicas (readiness, the port guard,
// discovery) and gang groups. It decides nothing: the pool's loop
// (internal/controller) owns a Workers and calls its steps after each
// decision; this package does not import the controller, which hands it
// what it needs as Deps and ServiceOptions.
//
// The files: workers.go (the type and what the tick calls), worker.go (a
// worker, the slot table of internal/slots, victims; no I/O), act.go
// (starting and stopping), acting.go (the acting jobs: starts, stops,
// listings off the loop, their results back on it), quiet.go, readiness.go
// (the admit package's Gate), rollout.go, cpu.go (the CPU samples),
// report.go (the workers' journal entries); a service pool's replicas:
// service.go, ports.go (the WorkerSpec), portguard.go (replicas.Guard),
// publish.go (discovery through replicas.Publishing), notify.go, gang.go
// and gang_report.go (gang groups); view.go (the workers as status shows
// them).
package workers

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

// Workers is the pool's side that acts: its slots (internal/slots), the starts
// and stops over Units (act.go), the backoff and the choice of victims, the
// quiet phase (quiet.go), what holds a start back (readiness.go) and the
// rollout (rollout.go). It decides nothing: the pool's tick tells it what
// to reach, after the decision, through
//
//	Reconcile      take in a listing of the units: crashes, stops, adoptions
//	QuietStep      stop the quiet workers whose quiet period is over
//	ReplaceCrashed start crashed workers again, up to the target
//	ScaleTo        follow a decision: start or drain to its count
//	RolloutStep    replace up to max_surge workers of an old revision
//	StopAll        one round of a drain of the whole pool
//
// It is the pool's, owned by the pool's loop as the rest of its state.
type Workers struct {
	name  string
	units Units
	jobs  *acting.Runner // the calls to systemd, off the loop (package acting)
	// dropLogged: the starts dropped unsent since the last start was
	// emitted have been logged (acting.go).
	dropLogged bool
	log        *eventlog.Logger
	report     *reporter // the workers' journal entries, on the pool's logger
	ledger     *capacity.Ledger
	QuietFile  quietFile // quiet-POOL.json, where the quiet phase survives a restart
	kick       func()    // wakes the pool's loop when a quiet phase ends

	// Cfg is the pool's configuration; a reload replaces it (the controller's Pool.update).
	Cfg   *config.Pool
	Slots *SlotTable
	// Target is the last decided count; crashed workers are replaced up to
	// it.
	Target int
	Roll   rollout
	// Stopping is set by Drain: the pool no longer scales or replaces.
	Stopping bool
	Ready    *admit.Gate           // readiness.go
	Quiet    map[string]*quietUnit // quiet.go: workers in their quiet phase
	restarts map[int]int           // crashes by slot, for status
	Svc      *service              // a service pool's (service.go); nil for queue workers
	Gang     GangDeps              // gang.go: free ports, the CPUs to split
}

// Deps are what the workers take from their pool: its name, systemd, the
// acting jobs' runner and the logger it shares, the host's budget, where
// the quiet phase is kept, and how to wake the pool's loop.
type Deps struct {
	Name     string
	Units    Units
	Jobs     *acting.Runner
	Log      *eventlog.Logger
	Ledger   *capacity.Ledger
	StateDir string
	Kick     func()
	Cfg      *config.Pool
}

// New makes a pool's workers, with no slot taken yet.
func New(d Deps) *Workers {
	return &Workers{
		name:      d.Name,
		units:     d.Units,
		jobs:      d.Jobs,
		log:       d.Log,
		report:    &reporter{log: d.Log},
		ledger:    d.Ledger,
		QuietFile: newQuietFile(d.Name, d.StateDir),
		kick:      d.Kick,
		Cfg:       d.Cfg,
		Slots:     newSlotTable(),
		restarts:  map[int]int{},
		Gang:      defaultGangDeps(),
	}
}

// Reconcile brings the slot table in line with a listing of the pool's units,
// reports what changed by itself and clears the failed units.
func (ws *Workers) Reconcile(ctx context.Context, now time.Time, listed []units.Worker) reconciled {
	r := ws.Slots.Reconcile(now, listed)
	ws.apply(ctx, now, r)
	ws.Svc.replicasReconciled(now, listed, r)
	ws.Svc.GuardRound(now)
	return r
}

// ReplaceCrashed starts the workers that crashed, up to the last decided
// target. A worker stopped from outside (an admin's systemctl stop, in r)
// is a scale-down by hand, not a crash: replacing it at once would only
// start a worker that the decision may drain again. The policy decides
// whether the pool needs it back (min_workers, demand).
func (ws *Workers) ReplaceCrashed(ctx context.Context, now time.Time, r reconciled) {
	ws.Target = max(0, ws.Target-len(r.Stopping))
	ws.StartUpTo(ctx, now, ws.Target, "replacing crashed worker")
}

// ScaleTo follows the decision d: its count becomes the target, and
// workers are started or drained to reach it.
func (ws *Workers) ScaleTo(ctx context.Context, now time.Time, d policy.Decision) {
	switch d.Action {
	case policy.ScaleUp:
		ws.Target = d.Desired
		ws.StartUpTo(ctx, now, d.Desired, "scale-up")
	case policy.ScaleDown:
		ws.Target = d.Desired
		ws.DrainDownTo(ctx, now, d.Desired)
	case policy.Stable:
		ws.Target = d.Desired
	}
}

// StopAll is one round of a drain of the whole pool, on a fresh listing:
// every quiet phase is cut short and every live worker stopped.
func (ws *Workers) StopAll(ctx context.Context, now time.Time, listed []units.Worker, why string) {
	ws.Reconcile(ctx, now, listed)
	if ws.Svc != nil {
		// Replicas leave discovery and serve out their drain periods,
		// as on a scale-down.
		ws.Svc.PumpService(ctx, now)
		for _, w := range ws.Slots.LiveWorkers() {
			ws.retire(ctx, now, w, why)
		}
		ws.Svc.PublishReady(ctx, now)
		ws.QuietStep(ctx, now)
		return
	}
	ws.endQuiet(ctx, now)
	for _, w := range ws.Slots.LiveWorkers() {
		ws.stopWorker(ctx, w, why)
	}
}

// Live and draining count the workers as of the last listing and the
// starts and stops since; live counts the starts in flight too: they are
// what the pool has asked for, never to be decided again.
func (ws *Workers) Live() int     { return len(ws.Slots.Live) + len(ws.Slots.Starting) }
func (ws *Workers) Draining() int { return ws.Slots.DrainingSlots() }

// List lists the pool's units, for an owner outside the loop (Drain).
func (ws *Workers) List(ctx context.Context) ([]units.Worker, error) {
	l := ws.ListPlan().List(ctx)
	if l.Err == nil {
		ws.Ready.RequiredRead(ws.Cfg, l.Required, l.ReqErr)
	}
	return l.Workers, l.Err
}

func (ws *Workers) workerFields(slot int, unit string, extra eventlog.Fields) eventlog.Fields {
	return ws.report.workerFields(slot, unit, extra)
}
