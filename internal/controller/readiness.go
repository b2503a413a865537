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
}

// admit returns how many of n wanted starts may go ahead now (why is the
// reason for them, e.g. "scale-up").
func (p *Pool) admit(ctx context.Context, now time.Time, n int, why string) int {
	if !p.readyToStart(ctx, now, n, why) {
		return 0
	}
	return p.claimCapacity(n, why)
}

// admitSurge is admit for a rollout's replacements: they wait for the
// required units and the start condition like any start, but are not held
// to the host's budget, since each replaces a worker that then drains
// (max_surge bounds the overlap).
func (p *Pool) admitSurge(ctx context.Context, now time.Time, n int) int {
	if !p.readyToStart(ctx, now, n, "rollout") {
		return 0
	}
	return n
}

// readyToStart says whether n starts may be tried now: the required units
// are active, and no skip by the start condition is fresher than a poll
// interval.
func (p *Pool) readyToStart(ctx context.Context, now time.Time, n int, why string) bool {
	if n <= 0 {
		return false
	}
	if waiting := p.requiredWaiting(ctx); len(waiting) > 0 {
		p.deferStarts(now, n, why, waiting)
		return false
	}
	p.releaseDeferred(now)
	return !now.Before(p.ready.retryAt)
}

// requiredWaiting returns the required units that are not active, each
// with its state ("postgresql.service (inactive)"). A failed read defers
// too: a start would pull the units in through Requires=, and fail with
// "dependency" if they cannot start.
func (p *Pool) requiredWaiting(ctx context.Context) []string {
	if len(p.cfg.Requires) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	states, err := p.units.UnitStates(rctx, p.cfg.Requires)
	if err != nil {
		return []string{fmt.Sprintf("the required units (cannot read them: %v)", err)}
	}
	return notActive(p.cfg.Requires, states)
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
func (p *Pool) deferStarts(now time.Time, n int, why string, waiting []string) {
	w := strings.Join(waiting, ", ")
	if p.ready.deferring && p.ready.waitingFor == w {
		return
	}
	if !p.ready.deferring {
		p.ready.deferring, p.ready.deferredSince = true, now
	}
	p.ready.waitingFor = w
	p.log.Event(eventlog.ScaleUpDeferred, eventlog.Notice, eventlog.Fields{
		"FLEXIQ_WAITING_FOR": w, "FLEXIQ_DEFERRED": fmt.Sprint(n), "FLEXIQ_REASON": why},
		"scale-up deferred: %d workers (%s) wait for %s; requires = [%s]", n, why, w, strings.Join(p.cfg.Requires, ", "))
}

// releaseDeferred ends a deferral episode.
func (p *Pool) releaseDeferred(now time.Time) {
	if !p.ready.deferring {
		return
	}
	waited := now.Sub(p.ready.deferredSince).Round(time.Second)
	p.ready.deferring, p.ready.waitingFor = false, ""
	p.log.Event(eventlog.ScaleUpDeferred, eventlog.Info, eventlog.Fields{"FLEXIQ_WAITED_SEC": fmt.Sprint(waited.Seconds())},
		"required units are active: releasing the deferred scale-up after %s", waited)
}

// claimCapacity claims room for n workers in the host's budget and returns
// how many fit. A start that does not fit is skipped, not left pending: the
// target drops to what the pool will have, and the policy asks again at the
// next tick.
func (p *Pool) claimCapacity(n int, why string) int {
	cost := p.cfg.WorkerCost()
	p.opts.Ledger.Set(p.name, cost, len(p.fleet.live)+len(p.fleet.draining))
	granted, short := p.opts.Ledger.Claim(p.name, cost, n)
	if granted < n {
		p.target = min(p.target, len(p.fleet.live)+granted)
		if !p.ready.exhausted {
			p.ready.exhausted = true
			p.log.Event(eventlog.CapacityExhausted, eventlog.Warning, eventlog.Fields{
				"FLEXIQ_WANTED": fmt.Sprint(n), "FLEXIQ_GRANTED": fmt.Sprint(granted), "FLEXIQ_REASON": why, "FLEXIQ_SHORT": short},
				"capacity exhausted: %d of %d workers (%s) skipped, short of %s", n-granted, n, why, short)
		}
	} else if p.ready.exhausted {
		p.ready.exhausted = false
		p.log.Event(eventlog.CapacityExhausted, eventlog.Info, nil,
			"capacity available again: starting %d workers (%s)", n, why)
	}
	return granted
}

// recount tells the ledger what the pool holds after its starts: a start
// that failed gives its claim back.
func (p *Pool) recount() {
	p.opts.Ledger.Set(p.name, p.cfg.WorkerCost(), len(p.fleet.live)+len(p.fleet.draining))
}

// conditionSkipped handles a start skipped by the start condition: not a
// crash, no backoff; the next attempt is a poll interval away, never a
// tight loop, however often the source wakes the pool.
func (p *Pool) conditionSkipped(now time.Time, slot int, unit string, err error) {
	p.ready.skips++
	p.ready.retryAt = now.Add(max(p.cfg.PollInterval, time.Second))
	if p.ready.skipping {
		return
	}
	p.ready.skipping = true
	p.log.Event(eventlog.ConditionSkip, eventlog.Notice, p.workerFields(slot, unit, eventlog.Fields{"FLEXIQ_ERROR": err.Error()}),
		"%s skipped: start_condition not met yet (not a crash, no backoff); retrying every %s", unit, max(p.cfg.PollInterval, time.Second))
}

// conditionPassed ends a skip episode after a start that went through.
func (p *Pool) conditionPassed(started []*worker) {
	if !p.ready.skipping || len(started) == 0 {
		return
	}
	w := started[0]
	p.log.Event(eventlog.ConditionSkip, eventlog.Info, p.workerFields(w.slot, w.unit, eventlog.Fields{"FLEXIQ_SKIPS": fmt.Sprint(p.ready.skips)}),
		"start_condition passes: %s started after %d skipped starts", w.unit, p.ready.skips)
	p.ready.skipping, p.ready.skips, p.ready.retryAt = false, 0, time.Time{}
}

func isConditionSkip(err error) bool { return errors.Is(err, units.ErrConditionSkipped) }
