package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/controller/acting"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/poolstore"
	"github.com/flexiq/flexiq-scaled/internal/slots"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Two-phase drain. With a quiet_signal, a scale-down first sends that
// signal to the worker's main process (Sidekiq's TSTP: take no new work,
// finish what is in hand), and the worker stops counting at once: it is
// draining. quiet_period_sec later comes the ordinary stop: drain_signal,
// drain_timeout_sec, SIGKILL by systemd. A worker in its quiet phase is
// still active as far as systemd knows, so only the daemon knows that it is
// quiet and when its stop is due: that is kept in the runtime directory
// (quiet-POOL.json, beside the pool's state file), so that a restart of
// the daemon during the quiet phase neither adopts the worker as live nor
// stops it early or late.

// quietUnit is a worker in its quiet phase.
type quietUnit struct {
	slot       int
	invocation string    // the run that was quieted; a restarted unit is a new worker
	deadline   time.Time // when its stop is due, on the controller's clock
	timer      *time.Timer
	// awaitGen, for a service replica, is the publish whose after-change
	// commands it waits for before its drain period begins (publish.go);
	// 0 once it has begun.
	awaitGen uint64
	// stopping: its stop is in flight (acting.go).
	stopping bool
}

const quietVersion = 1

type SavedQuiet struct {
	Version int               `json:"version"`
	Pool    string            `json:"pool"`
	Units   []savedQuietEntry `json:"units"`
}

type savedQuietEntry struct {
	Unit       string `json:"unit"`
	Slot       int    `json:"slot"`
	Invocation string `json:"invocation,omitempty"`
	// Deadline is when the stop is due, in nanoseconds of CLOCK_MONOTONIC,
	// which every process shares until the next boot (as the state file's
	// times).
	Deadline int64 `json:"deadline_mono_ns"`
}

// retire takes a live worker out of service: a quiet phase first when the
// pool has a quiet_signal, else the stop at once.
func (ws *Workers) retire(ctx context.Context, now time.Time, w *Worker, why string) bool {
	if ws.Svc != nil {
		return ws.Svc.retireReplica(ctx, now, w, why)
	}
	if ws.Cfg.QuietSignalNumber == 0 || ws.Cfg.QuietPeriod <= 0 {
		return ws.stopWorker(ctx, w, why)
	}
	ws.Slots.Stop(w, w.ports)
	q := &quietUnit{slot: w.slot, invocation: w.invocation, deadline: now.Add(ws.Cfg.QuietPeriod)}
	ws.addQuiet(now, w.unit, q)
	ws.QuietFile.save(ws.Quiet, ws.log)
	ws.report.draining(w.slot, w.unit, fmt.Sprintf("%s: quiet phase, %s sent to its main process; stop in %s",
		why, ws.Cfg.QuietSignal, ws.Cfg.QuietPeriod))
	// The signal is a job (acting.go): should it fail, the worker is
	// stopped at once instead, without a quiet phase.
	ws.callJob(ctx, acting.Other, killMain(w.unit, ws.Cfg.QuietSignalNumber), func(err error) {
		if err == nil || ws.Quiet[w.unit] != q || q.stopping {
			return
		}
		ws.log.Event(eventlog.WorkerDraining, eventlog.Warning, ws.workerFields(w.slot, w.unit, eventlog.Fields{"FLEXIQ_ERROR": err.Error()}),
			"cannot send %s to %s (%v): stopping it without a quiet phase", ws.Cfg.QuietSignal, w.unit, err)
		ws.quietStop(ctx, now, w.unit, q)
	})
	return true
}

// addQuiet records a quiet worker and wakes the pool's loop when its stop
// is due, however long the poll interval.
func (ws *Workers) addQuiet(now time.Time, unit string, q *quietUnit) {
	if ws.Quiet == nil {
		ws.Quiet = map[string]*quietUnit{}
	}
	// A hair late rather than early: the tick it causes must find the
	// deadline passed.
	q.timer = time.AfterFunc(max(0, q.deadline.Sub(now))+5*time.Millisecond, ws.kick)
	ws.Quiet[unit] = q
}

// QuietStep asks for the stop of every quiet worker whose quiet period is
// over, and forgets those that are gone (a worker may exit by itself once
// quiet). It runs after each reconcile.
func (ws *Workers) QuietStep(ctx context.Context, now time.Time) {
	changed := false
	for _, unit := range sortedKeys(ws.Quiet) {
		q := ws.Quiet[unit]
		if _, ok := ws.Slots.Draining[unit]; !ok {
			// Gone; reconcile has reported its stop.
			q.timer.Stop()
			delete(ws.Quiet, unit)
			changed = true
			continue
		}
		if q.awaitGen > 0 || q.stopping || now.Before(q.deadline) {
			continue
		}
		ws.quietStop(ctx, now, unit, q)
	}
	if changed {
		ws.QuietFile.save(ws.Quiet, ws.log)
	}
}

// quietStop emits the stop of a quiet worker whose quiet period is over;
// it stays quiet until systemd has taken the stop, and is asked again at
// the next tick should systemd refuse it.
func (ws *Workers) quietStop(ctx context.Context, now time.Time, unit string, q *quietUnit) {
	q.stopping = true
	ws.callJob(ctx, acting.Stop, stopUnit(unit), func(err error) {
		q.stopping = false
		if err != nil {
			ws.log.Event(eventlog.WorkerQuiet, eventlog.Err, ws.workerFields(q.slot, unit, eventlog.Fields{"FLEXIQ_ERROR": err.Error()}),
				"cannot stop %s at the end of its quiet phase: %v", unit, err)
			return
		}
		late := now.Sub(q.deadline).Round(time.Millisecond)
		ws.log.Event(eventlog.WorkerQuiet, eventlog.Info, ws.workerFields(q.slot, unit, eventlog.Fields{"FLEXIQ_LATE_MS": fmt.Sprint(late.Milliseconds())}),
			"%s of %s over: stopping it (%s, then SIGKILL after %s)", ws.quietName(), unit, ws.Cfg.DrainSignal, ws.Cfg.DrainTimeout)
		if ws.Quiet[unit] == q {
			q.timer.Stop()
			delete(ws.Quiet, unit)
			ws.QuietFile.save(ws.Quiet, ws.log)
		}
	})
}

// endQuiet cuts every quiet phase short: the pool is being drained
// entirely (removed, or the daemon stopped), which stops every worker now.
func (ws *Workers) endQuiet(ctx context.Context, now time.Time) {
	for _, q := range ws.Quiet {
		q.deadline = now
	}
	ws.QuietStep(ctx, now)
}

// quietFile is where the quiet workers are kept: quiet-POOL.json in the
// runtime directory, beside the state file.
type quietFile struct {
	store poolstore.Store[SavedQuiet]
	pool  string
}

func newQuietFile(pool, dir string) quietFile {
	return quietFile{store: poolstore.Store[SavedQuiet]{Dir: dir, Prefix: "quiet-"}, pool: pool}
}

func (f quietFile) Path() string { return f.store.Path(f.pool) }

// save writes the quiet workers, atomically; with none, it removes the
// file. A failure is logged: a restart would then adopt the quiet workers
// as live, and a later scale-down would drain them again.
func (f quietFile) save(quiet map[string]*quietUnit, log *eventlog.Logger) {
	var err error
	if len(quiet) == 0 {
		err = f.store.Remove(f.pool)
	} else {
		st := SavedQuiet{Version: quietVersion, Pool: f.pool}
		for _, unit := range sortedKeys(quiet) {
			q := quiet[unit]
			st.Units = append(st.Units, savedQuietEntry{Unit: unit, Slot: q.slot, Invocation: q.invocation, Deadline: int64(monoSince(q.deadline))})
		}
		err = f.store.Save(f.pool, st)
	}
	if err != nil {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil,
			"cannot save its quiet workers (a restart would take them for live ones): %v", err)
	}
}

// load reads the quiet workers a previous daemon left; ok is false when
// there is no file, err says why one is of no use.
func (f quietFile) load() (st SavedQuiet, ok bool, err error) {
	st, ok, err = f.store.Load(f.pool)
	if ok && err == nil && (st.Version != quietVersion || st.Pool != f.pool) {
		err = fmt.Errorf("version %d of pool %q, want version %d of %q", st.Version, st.Pool, quietVersion, f.pool)
	}
	return st, ok, err
}

// RestoreQuiet reads the quiet workers a previous daemon left, before the
// first reconcile: those still running the same invocation are draining,
// with their deadlines. A worker whose stop is already under way, that is
// gone, or that was restarted since, is not quiet any more.
func (ws *Workers) RestoreQuiet(now time.Time, existing []units.Worker) {
	st, ok, err := ws.QuietFile.load()
	if !ok {
		return
	}
	if err != nil {
		ws.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "ignoring its quiet workers file %s: %v", ws.QuietFile.Path(), err)
		return
	}
	byUnit := indexByUnit(existing)
	for _, e := range st.Units {
		w, ok := byUnit.Get(e.Unit)
		switch {
		case !ok || slots.Classify(w, true) != slots.Running || w.Slot != e.Slot:
			continue
		case e.Invocation != "" && w.InvocationID != "" && e.Invocation != w.InvocationID:
			continue
		}
		deadline := monoTime(time.Duration(e.Deadline))
		ws.Slots.Draining[e.Unit] = drainingUnit{Slot: e.Slot, Ours: true}
		ws.addQuiet(now, e.Unit, &quietUnit{slot: e.Slot, invocation: w.InvocationID, deadline: deadline})
		ws.log.Event(eventlog.Lifecycle, eventlog.Info, ws.workerFields(e.Slot, e.Unit, nil),
			"resumed the quiet phase of %s: its stop is due in %s", e.Unit, max(0, deadline.Sub(now)).Round(time.Millisecond))
	}
	ws.QuietFile.save(ws.Quiet, ws.log)
}

// quietName is what the journal calls the phase: a service replica's is
// its drain period, after it has left discovery (publish.go).
func (ws *Workers) quietName() string {
	if ws.Svc != nil {
		return "drain period"
	}
	return "quiet phase"
}
