package controller

import (
	"context"
	"errors"

	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// apply reports what a reconcile found and clears failed units.
func (p *Pool) apply(ctx context.Context, now time.Time, r reconciled) {
	for _, c := range r.crashed {
		p.report.crashed(c)
		p.restarts[c.worker.slot]++
	}
	for _, s := range r.stopping {
		p.report.draining(s.worker.slot, s.worker.unit, "being stopped from outside the daemon; its slot stays taken until it is gone")
	}
	for _, s := range r.restarted {
		p.log.Event(eventlog.WorkerStarted, eventlog.Notice, p.workerFields(s.worker.slot, s.worker.unit, nil),
			"worker %s was restarted from outside the daemon; adopted as it is", s.worker.unit)
	}
	for _, s := range r.stopped {
		p.report.stopped(s)
	}
	for _, unit := range r.resets {
		if p.dryRun() {
			break // a dry-run pool touches no unit
		}
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		// An error only means the unit is already gone.
		_ = p.units.ResetFailed(rctx, unit)
		cancel()
	}
}

// startUpTo starts workers until the pool has want live ones (at most
// max_workers).
func (p *Pool) startUpTo(ctx context.Context, now time.Time, want int, why string) {
	if p.stopping {
		return
	}
	want = min(want, p.cfg.MaxWorkers)
	// admit: required units, start condition, host capacity (readiness.go).
	if n := p.admit(ctx, now, want-len(p.fleet.live), why); n > 0 {
		p.conditionPassed(p.startWorkers(ctx, now, n, why))
		p.recount()
	}
}

// startWorkers starts n workers of the current definition in the lowest free
// slots whose backoff has expired, and returns the new workers. Starts run
// in parallel; each waits for its own start job, bounded. A slot whose unit
// name turns out to be taken (a unit still stopping that the last listing did
// not show) is not a failure: the pool re-lists and takes other slots.
func (p *Pool) startWorkers(ctx context.Context, now time.Time, n int, why string) []*worker {
	if p.dryRun() {
		return nil // a dry-run pool starts nothing
	}
	var started []*worker
	taken := map[int]bool{}
	for attempt := 0; attempt < 2 && n > 0; attempt++ {
		slots := p.fleet.freeSlots(now, n, taken)
		if len(slots) == 0 {
			break
		}
		type result struct {
			slot int
			err  error
		}
		results := make(chan result, len(slots))
		revision := p.revision()
		for _, slot := range slots {
			spec := workerSpec(p.cfg, slot, revision)
			go func() {
				sctx, cancel := context.WithTimeout(ctx, startTimeout)
				defer cancel()
				results <- result{slot, p.units.StartWorker(sctx, spec)}
			}()
		}
		exists := false
		for range slots {
			r := <-results
			unit := units.UnitName(p.name, r.slot)
			switch {
			case errors.Is(r.err, units.ErrUnitExists):
				taken[r.slot], exists = true, true
				p.log.Event(eventlog.Lifecycle, eventlog.Info, p.workerFields(r.slot, unit, nil),
					"slot %d is still taken (%v); re-listing and using another slot", r.slot, r.err)
			case isConditionSkip(r.err):
				p.conditionSkipped(now, r.slot, unit, r.err)
			case r.err != nil:
				delay := p.fleet.armBackoff(r.slot, now)
				p.report.startFailed(r.slot, unit, why, r.err, delay)
			default:
				w := &worker{slot: r.slot, unit: unit, revision: revision, since: now}
				p.fleet.live[r.slot] = w
				started = append(started, w)
				n--
				p.log.Event(eventlog.WorkerStarted, eventlog.Info, p.workerFields(r.slot, unit, nil), "started %s (%s)", unit, why)
			}
		}
		if !exists {
			break
		}
		// The listing tells what holds the taken slots: a unit still
		// stopping becomes a draining one, a running one is adopted.
		listed, err := p.list(ctx)
		if err != nil {
			break
		}
		p.apply(ctx, now, p.fleet.reconcile(now, listed))
		n = min(n, max(0, p.cfg.MaxWorkers+maxSurge(p.cfg)-len(p.fleet.live)))
	}
	return started
}

// drainDownTo stops workers until want remain (see pickVictims). systemd
// does the draining: the drain signal, drain_timeout_sec, SIGKILL; with a
// quiet_signal, a quiet phase comes first (quiet.go).
func (p *Pool) drainDownTo(ctx context.Context, now time.Time, want int) {
	for _, w := range pickVictims(p.fleet.liveWorkers(), len(p.fleet.live)-want, p.revision()) {
		p.retire(ctx, now, w, "scale-down")
	}
}

// stopWorker asks systemd to stop one worker; it stops counting as current
// at once, and its slot stays taken until systemd reports the unit gone,
// however long the drain takes: the listing, not the stop job's result (which
// a bus restart can lose), says when.
func (p *Pool) stopWorker(ctx context.Context, w *worker, why string) bool {
	if p.dryRun() {
		return false // a dry-run pool stops nothing
	}
	sctx, cancel := context.WithTimeout(ctx, callTimeout)
	// The job result is not needed; the channel is buffered, so nothing
	// blocks on it.
	_, err := p.units.StopWorker(sctx, w.unit)
	cancel()
	if err != nil {
		p.log.Event(eventlog.WorkerDraining, eventlog.Err, p.workerFields(w.slot, w.unit, nil), "cannot stop %s (%s): %v", w.unit, why, err)
		return false
	}
	p.fleet.stop(w)
	p.report.draining(w.slot, w.unit, why)
	return true
}

// Drain stops every worker of the pool and waits until systemd reports every
// one of its units gone. It re-lists while it waits, so that a worker whose
// start was still pending, or that started meanwhile, is stopped too.
func (p *Pool) Drain(ctx context.Context, why string) {
	dry := false
	p.do(func() {
		dry = p.dryRun()
		// A dry-run pool's workers were never the daemon's to stop.
		p.stopping = true
		if !dry {
			p.target = 0
		}
	})
	if dry {
		p.log.Event(eventlog.Lifecycle, eventlog.Info, nil, "is in dry-run: leaving its units as they are (%s)", why)
		return
	}
	for ctx.Err() == nil {
		var done, changed bool
		p.do(func() { done, changed = p.drainStep(ctx, why) })
		p.notify(changed)
		if done {
			// A drained pool has nothing left to carry across a restart.
			p.stateStore().Remove(p.name)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(drainPoll):
		}
	}
}

// drainStep is one round of Drain: it says whether the pool is drained,
// and whether its Status changed.
func (p *Pool) drainStep(ctx context.Context, why string) (done, changed bool) {
	now := p.clock()
	listed, err := p.list(ctx)
	// A cancelled drain (its pool was added back) stops nothing more:
	// the units may be the new pool's by now.
	if err == nil && ctx.Err() == nil {
		p.apply(ctx, now, p.fleet.reconcile(now, listed))
		p.endQuiet(ctx, now)
		for _, w := range p.fleet.liveWorkers() {
			p.stopWorker(ctx, w, why)
		}
	}
	done = err == nil && len(p.fleet.live) == 0 && len(p.fleet.draining) == 0 && !anyLoaded(listed)
	return done, p.publish(nil, nil)
}

// anyLoaded says whether a listing still holds a unit that is not failed (a
// failed one has just been reset).
func anyLoaded(listed []units.Worker) bool {
	for _, w := range listed {
		if w.ActiveState != "failed" && w.ActiveState != "inactive" {
			return true
		}
	}
	return false
}

// AwaitStop waits for a worker's stop job and clears what it leaves: a
// worker SIGKILLed at its drain timeout ends "failed" and would otherwise
// stay loaded. It returns the job's result.
func AwaitStop(ctx context.Context, u Units, unit string, done <-chan string, limit time.Duration) string {
	var result string
	select {
	case result = <-done:
	case <-time.After(limit):
		return "no result within " + limit.String()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	// An error only means the unit is already gone, as a clean stop leaves it.
	_ = u.ResetFailed(rctx, unit)
	return result
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
	}
}

func (p *Pool) workerFields(slot int, unit string, extra eventlog.Fields) eventlog.Fields {
	return p.report.workerFields(slot, unit, extra)
}
