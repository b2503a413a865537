package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// What stands between a wanted start and the start itself (issue 9): the
// units the pool requires must be active, a start condition that said "not
// yet" is asked again only at the next poll interval, and the host's
// budget must have room. Each of them logs once per episode, not per tick.

// readyState is the pool's memory of those episodes.
type readyState struct {
	// deferring: starts wait for required units (since deferredSince).
	deferring     bool
	deferredSince time.Time
	waitingFor    string
	// skipping: the start condition said "not yet" skips times in a row;
	// no start before retryAt.
	skipping bool
	skips    int
	retryAt  time.Time
	// exhausted: the host's budget cut a start short.
	exhausted bool
	// required are the required units' states as last read (with a
	// listing), requiredErr why they could not be; nil before the first.
	required    map[string]string
	requiredErr error
}

// admit returns how many of n wanted starts may go ahead now (why is the
// reason for them, e.g. "scale-up").
func (ws *workers) admit(ctx context.Context, now time.Time, n int, why string) int {
	if !ws.readyToStart(ctx, now, n, why) {
		return 0
	}
	return ws.claimCapacity(n, why)
}

// admitSurge is admit for a rollout's replacements: they wait for the
// required units and the start condition like any start, but are not held
// to the host's budget, since each replaces a worker that then drains
// (max_surge bounds the overlap).
func (ws *workers) admitSurge(ctx context.Context, now time.Time, n int) int {
	if !ws.readyToStart(ctx, now, n, "rollout") {
		return 0
	}
	return n
}

// readyToStart says whether n starts may be tried now: the required units
// are active, and no skip by the start condition is fresher than a poll
// interval.
func (ws *workers) readyToStart(ctx context.Context, now time.Time, n int, why string) bool {
	if n <= 0 {
		return false
	}
	if waiting := ws.requiredWaiting(ctx); len(waiting) > 0 {
		ws.deferStarts(now, n, why, waiting)
		return false
	}
	ws.releaseDeferred(now)
	return !now.Before(ws.ready.retryAt)
}

// requiredWaiting returns the required units that are not active, each
// with its state ("postgresql.service (inactive)"). A failed read defers
// too: a start would pull the units in through Requires=, and fail with
// "dependency" if they cannot start.
//
// The states are read with the tick's listing, off the loop (acting.go);
// only an owner outside the loop that has not listed yet (Start) reads
// them itself.
func (ws *workers) requiredWaiting(ctx context.Context) []string {
	if len(ws.cfg.Requires) == 0 {
		return nil
	}
	if ws.ready.required == nil {
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		states, err := ws.units.UnitStates(rctx, ws.cfg.Requires)
		cancel()
		ws.requiredRead(listing{required: states, reqErr: err})
	}
	if err := ws.ready.requiredErr; err != nil {
		return []string{fmt.Sprintf("the required units (cannot read them: %v)", err)}
	}
	return notActive(ws.cfg.Requires, ws.ready.required)
}

// requiredRead keeps the required units' states that a listing read.
func (ws *workers) requiredRead(l listing) {
	if len(ws.cfg.Requires) == 0 {
		return
	}
	ws.ready.required, ws.ready.requiredErr = l.required, l.reqErr
	if ws.ready.required == nil {
		ws.ready.required = map[string]string{}
	}
}

// notActive lists, in the order required, the units of required whose
// state is not "active", with that state. "reloading" is active too: the
// unit serves while it re-reads its configuration.
func notActive(required []string, states map[string]string) []string {
	var out []string
	for _, u := range required {
		st, ok := states[u]
		if !ok {
			st = "unknown"
		}
		if st != "active" && st != "reloading" {
			out = append(out, fmt.Sprintf("%s (%s)", u, st))
		}
	}
	return out
}

// deferStarts logs the start of a deferral episode, or a change of what it
// waits for. The pool's target stays: the starts are made once the units
// are active.
func (ws *workers) deferStarts(now time.Time, n int, why string, waiting []string) {
	w := strings.Join(waiting, ", ")
	if ws.ready.deferring && ws.ready.waitingFor == w {
		return
	}
	if !ws.ready.deferring {
		ws.ready.deferring, ws.ready.deferredSince = true, now
	}
	ws.ready.waitingFor = w
	ws.log.Event(eventlog.ScaleUpDeferred, eventlog.Notice, eventlog.Fields{
		"FLEXIQ_WAITING_FOR": w, "FLEXIQ_DEFERRED": fmt.Sprint(n), "FLEXIQ_REASON": why},
		"scale-up deferred: %d workers (%s) wait for %s; requires = [%s]", n, why, w, strings.Join(ws.cfg.Requires, ", "))
}

// releaseDeferred ends a deferral episode.
func (ws *workers) releaseDeferred(now time.Time) {
	if !ws.ready.deferring {
		return
	}
	waited := now.Sub(ws.ready.deferredSince).Round(time.Second)
	ws.ready.deferring, ws.ready.waitingFor = false, ""
	ws.log.Event(eventlog.ScaleUpDeferred, eventlog.Info, eventlog.Fields{"FLEXIQ_WAITED_SEC": fmt.Sprint(waited.Seconds())},
		"required units are active: releasing the deferred scale-up after %s", waited)
}

// claimCapacity claims room for n workers in the host's budget and returns
// how many fit. A start that does not fit is skipped, not left pending: the
// target drops to what the pool will have, and the policy asks again at the
// next tick.
func (ws *workers) claimCapacity(n int, why string) int {
	cost := ws.cfg.WorkerCost()
	ws.ledger.Set(ws.name, cost, ws.live()+ws.slots.DrainingSlots())
	granted, short := ws.ledger.Claim(ws.name, cost, n)
	if granted < n {
		ws.target = min(ws.target, ws.live()+granted)
		if !ws.ready.exhausted {
			ws.ready.exhausted = true
			ws.log.Event(eventlog.CapacityExhausted, eventlog.Warning, eventlog.Fields{
				"FLEXIQ_WANTED": fmt.Sprint(n), "FLEXIQ_GRANTED": fmt.Sprint(granted), "FLEXIQ_REASON": why, "FLEXIQ_SHORT": short},
				"capacity exhausted: %d of %d workers (%s) skipped, short of %s", n-granted, n, why, short)
		}
	} else if ws.ready.exhausted {
		ws.ready.exhausted = false
		ws.log.Event(eventlog.CapacityExhausted, eventlog.Info, nil,
			"capacity available again: starting %d workers (%s)", n, why)
	}
	return granted
}

// recount tells the ledger what the pool holds after its starts: a start
// that failed gives its claim back.
func (ws *workers) recount() {
	ws.ledger.Set(ws.name, ws.cfg.WorkerCost(), ws.live()+ws.slots.DrainingSlots())
}

// conditionSkipped handles a start skipped by the start condition: not a
// crash, no backoff; the next attempt is a poll interval away, never a
// tight loop, however often the source wakes the pool.
func (ws *workers) conditionSkipped(now time.Time, slot int, unit string, err error) {
	ws.ready.skips++
	ws.ready.retryAt = now.Add(max(ws.cfg.PollInterval, time.Second))
	if ws.ready.skipping {
		return
	}
	ws.ready.skipping = true
	ws.log.Event(eventlog.ConditionSkip, eventlog.Notice, ws.workerFields(slot, unit, eventlog.Fields{"FLEXIQ_ERROR": err.Error()}),
		"%s skipped: start_condition not met yet (not a crash, no backoff); retrying every %s", unit, max(ws.cfg.PollInterval, time.Second))
}

// conditionPassed ends a skip episode after a start that went through.
func (ws *workers) conditionPassed(started []*worker) {
	if !ws.ready.skipping || len(started) == 0 {
		return
	}
	w := started[0]
	ws.log.Event(eventlog.ConditionSkip, eventlog.Info, ws.workerFields(w.slot, w.unit, eventlog.Fields{"FLEXIQ_SKIPS": fmt.Sprint(ws.ready.skips)}),
		"start_condition passes: %s started after %d skipped starts", w.unit, ws.ready.skips)
	ws.ready.skipping, ws.ready.skips, ws.ready.retryAt = false, 0, time.Time{}
}

func isConditionSkip(err error) bool { return errors.Is(err, units.ErrConditionSkipped) }
