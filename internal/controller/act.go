package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// apply reports what a reconcile found and clears failed units.
func (ws *workers) apply(ctx context.Context, now time.Time, r reconciled) {
	for _, c := range r.crashed {
		ws.report.crashed(c)
		ws.restarts[c.worker.slot]++
	}
	for _, s := range r.stopping {
		ws.report.draining(s.worker.slot, s.worker.unit, "being stopped from outside the daemon; its slot stays taken until it is gone")
	}
	for _, s := range r.restarted {
		ws.log.Event(eventlog.WorkerStarted, eventlog.Notice, ws.workerFields(s.worker.slot, s.worker.unit, nil),
			"worker %s was restarted from outside the daemon; adopted as it is", s.worker.unit)
	}
	for _, s := range r.stopped {
		ws.report.stopped(s)
	}
	for _, unit := range r.stops {
		if ws.dryRun() {
			break
		}
		sctx, cancel := context.WithTimeout(ctx, callTimeout)
		// An error only means the unit is already gone or going.
		_, _ = ws.units.StopWorker(sctx, unit)
		cancel()
	}
	for _, unit := range r.resets {
		if ws.dryRun() {
			break // a dry-run pool touches no unit
		}
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		// An error only means the unit is already gone.
		_ = ws.units.ResetFailed(rctx, unit)
		cancel()
	}
}

// startUpTo starts workers until the pool has want live ones (at most
// max_workers).
func (ws *workers) startUpTo(ctx context.Context, now time.Time, want int, why string) {
	if ws.stopping {
		return
	}
	want = min(want, ws.cfg.MaxWorkers)
	// admit: required units, start condition, host capacity (readiness.go).
	if n := ws.admit(ctx, now, want-len(ws.fleet.live), why); n > 0 {
		ws.conditionPassed(ws.startWorkers(ctx, now, n, why))
		ws.recount()
	}
}

// startWorkers starts n workers of the current definition in the lowest free
// slots whose backoff has expired, and returns the new workers. Starts run
// in parallel; each waits for its own start job, bounded. A slot whose unit
// name turns out to be taken (a unit still stopping that the last listing did
// not show) is not a failure: the pool re-lists and takes other slots.
func (ws *workers) startWorkers(ctx context.Context, now time.Time, n int, why string) []*worker {
	if ws.dryRun() {
		return nil // a dry-run pool starts nothing
	}
	var started []*worker
	taken := map[int]bool{}
	for attempt := 0; attempt < 2 && n > 0; attempt++ {
		slots := ws.fleet.freeSlots(now, n, taken)
		for held := ws.heldSlots(now, slots); len(held) > 0; held = ws.heldSlots(now, slots) {
			maps.Copy(taken, held)
			slots = ws.fleet.freeSlots(now, n, taken)
		}
		if len(slots) == 0 {
			break
		}
		type result struct {
			slot int
			err  error
		}
		results := make(chan result, len(slots))
		revision := ws.revision()
		specs, ports := ws.specsFor(now, slots, revision, why)
		for _, slot := range slots {
			spec, ok := specs[slot]
			if !ok {
				results <- result{slot, errPortsFailed}
				continue
			}
			go func() {
				sctx, cancel := context.WithTimeout(ctx, startTimeout)
				defer cancel()
				results <- result{slot, ws.units.StartWorker(sctx, spec)}
			}()
		}
		exists := false
		for range slots {
			r := <-results
			unit := units.UnitName(ws.name, r.slot)
			switch {
			case errors.Is(r.err, units.ErrUnitExists):
				taken[r.slot], exists = true, true
				ws.log.Event(eventlog.Lifecycle, eventlog.Info, ws.workerFields(r.slot, unit, nil),
					"slot %d is still taken (%v); re-listing and using another slot", r.slot, r.err)
			case errors.Is(r.err, errPortsFailed):
				// Reported above, its slot backing off.
			case isConditionSkip(r.err):
				ws.conditionSkipped(now, r.slot, unit, r.err)
			case r.err != nil:
				delay := ws.fleet.armBackoff(r.slot, now)
				ws.report.startFailed(r.slot, unit, why, r.err, delay)
			default:
				w := &worker{slot: r.slot, unit: unit, revision: revision, since: now, ports: ports[r.slot], size: len(specs[r.slot].Ranks),
					rankPorts: rankPortsOf(ws.cfg.Service, specs[r.slot].Ranks)}
				ws.fleet.live[r.slot] = w
				ws.replicaStarted(now, w)
				started = append(started, w)
				n--
				ranks := ""
				if w.size > 1 {
					ranks = fmt.Sprintf(" with its %d ranks", w.size)
				}
				ws.log.Event(eventlog.WorkerStarted, eventlog.Info, ws.workerFields(r.slot, unit, nil), "started %s%s (%s)", unit, ranks, why)
			}
		}
		if !exists {
			break
		}
		// The listing tells what holds the taken slots: a unit still
		// stopping becomes a draining one, a running one is adopted.
		listed, err := ws.list(ctx)
		if err != nil {
			break
		}
		ws.reconcile(ctx, now, listed)
		n = min(n, max(0, ws.cfg.MaxWorkers+maxSurge(ws.cfg)-len(ws.fleet.live)))
	}
	return started
}

// drainDownTo stops workers until want remain (see pickVictims). systemd
// does the draining: the drain signal, drain_timeout_sec, SIGKILL; with a
// quiet_signal, a quiet phase comes first (quiet.go).
func (ws *workers) drainDownTo(ctx context.Context, now time.Time, want int) {
	victims := pickVictims(ws.fleet.liveWorkers(), len(ws.fleet.live)-want, ws.revision())
	if ws.svc != nil {
		victims = ws.serviceVictims(len(ws.fleet.live) - want)
	}
	for _, w := range victims {
		ws.retire(ctx, now, w, "scale-down")
	}
}

// stopWorker asks systemd to stop one worker; it stops counting as current
// at once, and its slot stays taken until systemd reports the unit gone,
// however long the drain takes: the listing, not the stop job's result (which
// a bus restart can lose), says when.
func (ws *workers) stopWorker(ctx context.Context, w *worker, why string) bool {
	if ws.dryRun() {
		return false // a dry-run pool stops nothing
	}
	sctx, cancel := context.WithTimeout(ctx, callTimeout)
	// The job result is not needed; the channel is buffered, so nothing
	// blocks on it.
	_, err := ws.units.StopWorker(sctx, w.unit)
	cancel()
	if err != nil {
		ws.log.Event(eventlog.WorkerDraining, eventlog.Err, ws.workerFields(w.slot, w.unit, nil), "cannot stop %s (%s): %v", w.unit, why, err)
		return false
	}
	ws.untrack(w)
	ws.fleet.stop(w)
	ws.report.draining(w.slot, w.unit, why)
	return true
}

// errPortsFailed marks a slot whose ports could not be assigned: its
// failed start is reported where it happened.
var errPortsFailed = errors.New("ports not assigned")

// portsHeld are the ports this pool's replicas hold, live or draining: an
// auto port avoids them.
func (ws *workers) portsHeld() map[int]bool {
	held := map[int]bool{}
	if ws.svc == nil {
		return held
	}
	for _, w := range ws.fleet.live {
		for _, p := range w.ports {
			held[p] = true
		}
		for _, rp := range w.rankPorts {
			for _, p := range rp {
				held[p] = true
			}
		}
	}
	for _, d := range ws.fleet.draining {
		for _, p := range d.ports {
			held[p] = true
		}
	}
	return held
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
