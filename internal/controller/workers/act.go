package workers

import (
	"context"
	"maps"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/acting"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// apply reports what a reconcile found and clears failed units.
func (ws *Workers) apply(ctx context.Context, now time.Time, r reconciled) {
	for _, c := range r.Crashed {
		ws.report.crashed(c)
		ws.restarts[c.Worker.slot]++
	}
	for _, s := range r.Stopping {
		ws.report.draining(s.Worker.slot, s.Worker.unit, "being stopped from outside the daemon; its slot stays taken until it is gone")
	}
	for _, s := range r.Restarted {
		ws.log.Event(eventlog.WorkerStarted, eventlog.Notice, ws.workerFields(s.Worker.slot, s.Worker.unit, nil),
			"worker %s was restarted from outside the daemon; adopted as it is", s.Worker.unit)
	}
	for _, s := range r.Stopped {
		ws.report.stopped(s)
	}
	if dryRun(ws.Cfg) {
		return // a dry-run pool touches no unit
	}
	for _, unit := range r.Stops {
		// An error only means the unit is already gone or going.
		ws.forget(ctx, acting.Stop, stopUnit(unit))
	}
	for _, unit := range r.Resets {
		// An error only means the unit is already gone.
		ws.forget(ctx, acting.Other, func(ctx context.Context, u Units) error { return u.ResetFailed(ctx, unit) })
	}
}

// StartUpTo starts workers until the pool has want live ones (at most
// max_workers).
func (ws *Workers) StartUpTo(ctx context.Context, now time.Time, want int, why string) {
	if ws.Stopping {
		return
	}
	want = min(want, ws.Cfg.MaxWorkers)
	// admit: required units, start condition, host capacity (readiness.go).
	if n := ws.admit(ctx, now, want-ws.Live(), why); n > 0 {
		ws.StartWorkers(ctx, now, n, why, nil)
		ws.Recount()
	}
}

// StartWorkers emits the starts of n workers of the current definition, in
// the lowest free slots whose backoff has expired: each slot is reserved
// for its start (slots.Table.Starting) until its result comes back to the loop
// (startDone, acting.go). then, when not nil, runs after each start that
// went through (a rollout stops the worker it replaces). A slot whose unit
// name turns out to be taken (a unit still stopping that the last listing
// did not show) is not a failure: the next tick re-lists and takes others.
func (ws *Workers) StartWorkers(ctx context.Context, now time.Time, n int, why string, then func(*Worker)) {
	ws.startIn(ctx, now, n, why, then, 0)
}

// startIn is StartWorkers, for its first attempt or its second (a slot
// found taken is tried once more elsewhere).
func (ws *Workers) startIn(ctx context.Context, now time.Time, n int, why string, then func(*Worker), attempt int) {
	if dryRun(ws.Cfg) || n <= 0 {
		return // a dry-run pool starts nothing
	}
	slots := ws.Slots.FreeSlots(now, n, nil)
	taken := map[int]bool{}
	for held := ws.Svc.heldSlots(now, slots); len(held) > 0; held = ws.Svc.heldSlots(now, slots) {
		maps.Copy(taken, held)
		slots = ws.Slots.FreeSlots(now, n, taken)
	}
	revision := ws.Revision()
	specs, ports := ws.specsFor(now, slots, revision, why)
	for _, slot := range slots {
		spec, ok := specs[slot]
		if !ok {
			continue // reported in specsFor, its slot backing off
		}
		w := &Worker{slot: slot, unit: units.UnitName(ws.name, slot), revision: revision, since: now, ports: ports[slot],
			size: len(spec.Ranks), rankPorts: rankPortsOf(ws.Cfg.Service, spec.Ranks)}
		ws.startJob(ctx, now, w, spec, why, then, attempt)
	}
}

// DrainDownTo stops workers until want remain (see PickVictims). systemd
// does the draining: the drain signal, drain_timeout_sec, SIGKILL; with a
// quiet_signal, a quiet phase comes first (quiet.go).
func (ws *Workers) DrainDownTo(ctx context.Context, now time.Time, want int) {
	// Workers still starting count: the stops come out of the live ones.
	excess := min(ws.Live()-want, len(ws.Slots.Live))
	victims := PickVictims(ws.Slots.LiveWorkers(), excess, ws.Revision())
	if ws.Svc != nil {
		victims = ws.Svc.ServiceVictims(excess)
	}
	for _, w := range victims {
		ws.retire(ctx, now, w, "scale-down")
	}
}

// stopWorker asks systemd to stop one worker: it stops counting as current
// at once, and its slot stays taken until systemd reports the unit gone,
// however long the drain takes: the listing, not the stop job's result (which
// a bus restart can lose), says when. The stop itself is a job (acting.go):
// should systemd refuse it, the worker is live again.
func (ws *Workers) stopWorker(ctx context.Context, w *Worker, why string) bool {
	if dryRun(ws.Cfg) {
		return false // a dry-run pool stops nothing
	}
	ws.Svc.untrack(w)
	ws.Slots.Stop(w, w.ports)
	ws.report.draining(w.slot, w.unit, why)
	ws.stopJob(ctx, w, why)
	return true
}

// portsHeld are the ports this pool's replicas hold, live or draining: an
// auto port avoids them.
func (ws *Workers) portsHeld() map[int]bool {
	held := map[int]bool{}
	if ws.Svc == nil {
		return held
	}
	for _, w := range ws.Slots.Live {
		holdPorts(held, w)
	}
	for _, d := range ws.Slots.Draining {
		for _, p := range d.Ports {
			held[p] = true
		}
	}
	// A start in flight holds its slot's ports as it holds the slot.
	for _, w := range ws.Slots.Starting {
		holdPorts(held, w)
	}
	return held
}

// holdPorts adds w's ports, its ranks' too, to held.
func holdPorts(held map[int]bool, w *Worker) {
	for _, p := range w.ports {
		held[p] = true
	}
	for _, rp := range w.rankPorts {
		for _, p := range rp {
			held[p] = true
		}
	}
}

func workerSpec(c *config.Pool, slot int, revision string) units.WorkerSpec {
	return units.WorkerSpec{
		Pool:               c.Name,
		Slot:               slot,
		Exec:               c.Exec,
		User:               c.User,
		Group:              c.Group,
		WorkingDirectory:   c.WorkingDirectory,
		Environment:        c.Environment,
		EnvironmentFiles:   c.EnvironmentFiles,
		Hardening:          c.Hardening,
		KillSignal:         c.DrainSignalNumber,
		StopTimeout:        c.DrainTimeout,
		CPUQuotaPerSecUSec: c.Limits.CPUQuotaPerSecUSec,
		MemoryMax:          c.Limits.MemoryMaxBytes,
		TasksMax:           c.Limits.TasksMax,
		Requires:           c.Requires,
		StartCondition:     c.StartCondition,
		Revision:           revision,
		NotifyReady:        c.Service != nil && c.Service.Readiness.Kind == config.ReadyNotify,
	}
}
