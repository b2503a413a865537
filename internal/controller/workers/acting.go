package workers

// The workers' side of the acting jobs (package acting): what a start, a stop and
// a reset send to systemd off the loop, and what their results change back
// on it. A start's slot is reserved from the moment it is decided
// (slots.Table.Starting) until its result: no second start takes the slot, and
// the decision counts the worker as current. A stop takes its worker out
// of the live ones at once (slots.Table.Stop): it is never decided again.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/controller/acting"
	"github.com/flexiq/flexiq-scaled/internal/controller/admit"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// startJob emits the start of w, in its slot, with spec.
func (ws *Workers) startJob(ctx context.Context, now time.Time, w *Worker, spec units.WorkerSpec, why string, then func(*Worker), attempt int) {
	ws.Slots.Starting[w.slot] = w
	ws.dropLogged = false
	u := ws.units
	// A replica's port guard judges its listeners by its units' cgroups:
	// read with the start, they need no call on the loop (portguard.go).
	var cgUnits []string
	if ws.Svc != nil && ws.Svc.Guard != nil {
		cgUnits = append(cgUnits, w.unit)
		for r := 1; r < len(spec.Ranks); r++ {
			cgUnits = append(cgUnits, units.RankUnitName(ws.name, w.slot, r))
		}
	}
	var err error
	var cgroups []string
	ws.jobs.Submit(ctx, &acting.Job{
		Kind:         acting.Start,
		Supersedable: true,
		Call: func(ctx context.Context) {
			sctx, cancel := context.WithTimeout(ctx, startTimeout)
			defer cancel()
			if err = u.StartWorker(sctx, spec); err != nil {
				return
			}
			for _, unit := range cgUnits {
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				cg, _ := u.ControlGroup(cctx, unit) // "" is read again when needed
				cancel()
				cgroups = append(cgroups, cg)
			}
		},
		Done: func(sent bool) {
			if len(cgroups) > 0 {
				w.cgroup, w.rankCgroups = cgroups[0], cgroups[1:]
			}
			if ws.startDone(now, w, why, sent, err, then) && attempt == 0 && !ws.Stopping &&
				ws.Live() < ws.Cfg.MaxWorkers+maxSurge(ws.Cfg) {
				ws.startIn(ctx, now, 1, why, then, 1)
			}
		},
	})
}

// startDone takes in the result of w's start, on the loop. It says
// whether the slot was found taken: the start may go to another.
func (ws *Workers) startDone(now time.Time, w *Worker, why string, sent bool, err error, then func(*Worker)) (taken bool) {
	if ws.Slots.Starting[w.slot] == w {
		delete(ws.Slots.Starting, w.slot)
	}
	defer ws.Recount()
	switch {
	case !sent:
		// Superseded before its turn: the next tick decides again. One
		// entry for the lot, not one per start.
		if !ws.dropLogged {
			ws.dropLogged = true
			ws.log.Event(eventlog.Lifecycle, eventlog.Info, ws.workerFields(w.slot, w.unit, nil),
				"starts not sent yet (%s, from %s) dropped: what the pool is asked for changed meanwhile", why, w.unit)
		}
		ws.kick()
		return false
	case errors.Is(err, units.ErrUnitExists):
		ws.log.Event(eventlog.Lifecycle, eventlog.Info, ws.workerFields(w.slot, w.unit, nil),
			"slot %d is still taken (%v); re-Listing and using another slot", w.slot, err)
		// The next tick's listing tells what holds the slot: a unit
		// still stopping becomes a draining one, a running one is
		// adopted. Until then no start takes it.
		ws.Slots.Take(w.slot)
		ws.kick()
		return true
	case admit.IsConditionSkip(err):
		ws.Ready.ConditionSkipped(now, ws.Cfg, w.slot, w.unit, err)
		return false
	case err != nil:
		delay := ws.Slots.ArmBackoff(w.slot, now)
		ws.report.startFailed(w.slot, w.unit, why, err, delay)
		return false
	}
	// The listing begun before this start ended may not show it yet
	// (slots.Table.Reconcile).
	w.listedFrom = ws.Slots.Listings + 1
	ws.Slots.Live[w.slot] = w
	ws.Svc.replicaStarted(now, w)
	ranks := ""
	if w.size > 1 {
		ranks = fmt.Sprintf(" with its %d ranks", w.size)
	}
	ws.log.Event(eventlog.WorkerStarted, eventlog.Info, ws.workerFields(w.slot, w.unit, nil), "started %s%s (%s)", w.unit, ranks, why)
	ws.Ready.ConditionPassed(w.slot, w.unit)
	if then != nil {
		then(w)
	}
	return false
}

// stopJob emits the stop of w, which is draining already. Should systemd
// refuse it (unreachable for longer than a call's timeout), w is live
// again, as it was before the stop was decided: the next tick decides anew.
func (ws *Workers) stopJob(ctx context.Context, w *Worker, why string) {
	ws.callJob(ctx, acting.Stop, stopUnit(w.unit), func(err error) {
		if err == nil {
			return
		}
		ws.log.Event(eventlog.WorkerDraining, eventlog.Err, ws.workerFields(w.slot, w.unit, nil), "cannot stop %s (%s): %v", w.unit, why, err)
		ws.Slots.Unstop(w)
		ws.Svc.replicaStarted(w.since, w)
	})
}

// stopUnit is the call of a stop job. The stop job's own result is not
// needed; its channel is buffered, so nothing blocks on it.
func stopUnit(unit string) func(context.Context, Units) error {
	return func(ctx context.Context, u Units) error {
		_, err := u.StopWorker(ctx, unit)
		return err
	}
}

// killMain is the call of a signal to a unit's main process.
func killMain(unit string, sig int) func(context.Context, Units) error {
	return func(ctx context.Context, u Units) error { return u.KillMain(ctx, unit, sig) }
}

// forget emits a call whose result nothing waits for (a reset, a stop of
// a group's last ranks): it only must not run on the loop.
func (ws *Workers) forget(ctx context.Context, kind acting.Kind, call func(context.Context, Units) error) {
	ws.callJob(ctx, kind, call, nil)
}

// callJob emits one call to systemd, bounded by a call's timeout; done,
// when not nil, takes its error on the loop.
func (ws *Workers) callJob(ctx context.Context, kind acting.Kind, call func(context.Context, Units) error, done func(error)) {
	u := ws.units
	var err error
	j := &acting.Job{Kind: kind, Call: func(ctx context.Context) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		err = call(cctx, u)
	}}
	if done != nil {
		j.Done = func(bool) { done(err) }
	}
	ws.jobs.Submit(ctx, j)
}

// Listing is what a tick's first call to systemd found: the pool's units,
// and the states of the units it requires (readiness.go).
type Listing struct {
	Workers  []units.Worker
	Err      error
	Required map[string]string
	ReqErr   error
	// Seq numbers the listing (slots.Table.Listings): workers started after it
	// began are not judged by it.
	Seq uint64
}

// ListPlan is what a listing needs, taken from the pool by its owner.
type ListPlan struct {
	units    Units
	pool     string
	requires []string
	seq      uint64
}

// ListPlan numbers a new listing and hands it what it needs; owner only.
func (ws *Workers) ListPlan() ListPlan {
	ws.Slots.Listings++
	return ListPlan{units: ws.units, pool: ws.name, requires: ws.Cfg.Requires, seq: ws.Slots.Listings}
}

// List lists the pool's units, off the loop.
func (pl ListPlan) List(ctx context.Context) Listing {
	l := Listing{Seq: pl.seq}
	lctx, cancel := context.WithTimeout(ctx, callTimeout)
	l.Workers, l.Err = pl.units.ListWorkers(lctx, pl.pool)
	cancel()
	if l.Err == nil && len(pl.requires) > 0 {
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		l.Required, l.ReqErr = pl.units.UnitStates(rctx, pl.requires)
		cancel()
	}
	return l
}

// ActingCounts are the jobs in flight, for the snapshot.
func (ws *Workers) ActingCounts() (starting, stopping int) {
	return len(ws.Slots.Starting), ws.jobs.Count(acting.Stop)
}
