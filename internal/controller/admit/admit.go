// Package admit is what stands between a pool's wanted start and the
// start itself (issue 9): the units the pool requires must be active, a
// start condition that said "not yet" is asked again only at the next
// poll interval, and the host's budget must have room. Each of them logs
// once per episode, not per tick. It holds the episodes' memory; the
// controller asks it before each round of starts.
package admit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/capacity"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Gate is one pool's admission, owned by the pool's loop.
type Gate struct {
	name   string
	log    *eventlog.Logger
	ledger *capacity.Ledger
	// fields are the journal fields of a worker's entries (the pool's).
	fields func(slot int, unit string, extra eventlog.Fields) eventlog.Fields
	// states reads the required units' states, for an owner outside the
	// loop that has not listed yet.
	states func(ctx context.Context, names []string) (map[string]string, error)
	// Timeout bounds states.
	timeout time.Duration

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

// Hooks are what a Gate needs of its pool.
type Hooks struct {
	Name    string
	Log     *eventlog.Logger
	Ledger  *capacity.Ledger
	Fields  func(slot int, unit string, extra eventlog.Fields) eventlog.Fields
	States  func(ctx context.Context, names []string) (map[string]string, error)
	Timeout time.Duration
}

// New is the Gate of a pool.
func New(h Hooks) *Gate {
	return &Gate{name: h.Name, log: h.Log, ledger: h.Ledger, fields: h.Fields, states: h.States, timeout: h.Timeout}
}

// Admit returns how many of n wanted starts may go ahead now (why is the
// reason for them, e.g. "scale-up"); held is what the pool holds, live
// and draining, for the host's budget. cut says the budget granted fewer
// than n: the skipped starts are not left pending, the caller's target
// drops to what the pool will have.
func (g *Gate) Admit(ctx context.Context, now time.Time, cfg *config.Pool, n, held int, why string) (granted int, cut bool) {
	if !g.ReadyToStart(ctx, now, cfg, n, why) {
		return 0, false
	}
	granted = g.claimCapacity(cfg, n, held, why)
	return granted, granted < n
}

// ReadyToStart says whether n starts may be tried now: the required units
// are active, and no skip by the start condition is fresher than a poll
// interval. A rollout's replacements ask only this: they are not held to
// the host's budget, since each replaces a worker that then drains
// (max_surge bounds the overlap).
func (g *Gate) ReadyToStart(ctx context.Context, now time.Time, cfg *config.Pool, n int, why string) bool {
	if n <= 0 {
		return false
	}
	if waiting := g.requiredWaiting(ctx, cfg); len(waiting) > 0 {
		g.deferStarts(now, cfg, n, why, waiting)
		return false
	}
	g.releaseDeferred(now)
	return !now.Before(g.retryAt)
}

// requiredWaiting returns the required units that are not active, each
// with its state ("postgresql.service (inactive)"). A failed read defers
// too: a start would pull the units in through Requires=, and fail with
// "dependency" if they cannot start.
//
// The states are read with the tick's listing, off the loop; only an
// owner outside the loop that has not listed yet (Start) reads them
// itself.
func (g *Gate) requiredWaiting(ctx context.Context, cfg *config.Pool) []string {
	if len(cfg.Requires) == 0 {
		return nil
	}
	if g.required == nil {
		rctx, cancel := context.WithTimeout(ctx, g.timeout)
		states, err := g.states(rctx, cfg.Requires)
		cancel()
		g.RequiredRead(cfg, states, err)
	}
	if err := g.requiredErr; err != nil {
		return []string{fmt.Sprintf("the required units (cannot read them: %v)", err)}
	}
	return notActive(cfg.Requires, g.required)
}

// RequiredRead keeps the required units' states that a listing read.
func (g *Gate) RequiredRead(cfg *config.Pool, states map[string]string, err error) {
	if len(cfg.Requires) == 0 {
		return
	}
	g.required, g.requiredErr = states, err
	if g.required == nil {
		g.required = map[string]string{}
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
func (g *Gate) deferStarts(now time.Time, cfg *config.Pool, n int, why string, waiting []string) {
	w := strings.Join(waiting, ", ")
	if g.deferring && g.waitingFor == w {
		return
	}
	if !g.deferring {
		g.deferring, g.deferredSince = true, now
	}
	g.waitingFor = w
	g.log.Event(eventlog.ScaleUpDeferred, eventlog.Notice, eventlog.Fields{
		"FLEXIQ_WAITING_FOR": w, "FLEXIQ_DEFERRED": fmt.Sprint(n), "FLEXIQ_REASON": why},
		"scale-up deferred: %d workers (%s) wait for %s; requires = [%s]", n, why, w, strings.Join(cfg.Requires, ", "))
}

// releaseDeferred ends a deferral episode.
func (g *Gate) releaseDeferred(now time.Time) {
	if !g.deferring {
		return
	}
	waited := now.Sub(g.deferredSince).Round(time.Second)
	g.deferring, g.waitingFor = false, ""
	g.log.Event(eventlog.ScaleUpDeferred, eventlog.Info, eventlog.Fields{"FLEXIQ_WAITED_SEC": fmt.Sprint(waited.Seconds())},
		"required units are active: releasing the deferred scale-up after %s", waited)
}

// claimCapacity claims room for n workers in the host's budget and returns
// how many fit. A start that does not fit is skipped, not left pending: the
// caller lowers its target to what the pool will have, and the policy asks
// again at the next tick.
func (g *Gate) claimCapacity(cfg *config.Pool, n, held int, why string) int {
	cost := cfg.WorkerCost()
	g.ledger.Set(g.name, cost, held)
	granted, short := g.ledger.Claim(g.name, cost, n)
	if granted < n {
		if !g.exhausted {
			g.exhausted = true
			g.log.Event(eventlog.CapacityExhausted, eventlog.Warning, eventlog.Fields{
				"FLEXIQ_WANTED": fmt.Sprint(n), "FLEXIQ_GRANTED": fmt.Sprint(granted), "FLEXIQ_REASON": why, "FLEXIQ_SHORT": short},
				"capacity exhausted: %d of %d workers (%s) skipped, short of %s", n-granted, n, why, short)
		}
	} else if g.exhausted {
		g.exhausted = false
		g.log.Event(eventlog.CapacityExhausted, eventlog.Info, nil,
			"capacity available again: starting %d workers (%s)", n, why)
	}
	return granted
}

// Recount tells the ledger what the pool holds after its starts: a start
// that failed gives its claim back.
func (g *Gate) Recount(cfg *config.Pool, held int) {
	g.ledger.Set(g.name, cfg.WorkerCost(), held)
}

// ConditionSkipped handles a start skipped by the start condition: not a
// crash, no backoff; the next attempt is a poll interval away, never a
// tight loop, however often the source wakes the pool.
func (g *Gate) ConditionSkipped(now time.Time, cfg *config.Pool, slot int, unit string, err error) {
	g.skips++
	g.retryAt = now.Add(max(cfg.PollInterval, time.Second))
	if g.skipping {
		return
	}
	g.skipping = true
	g.log.Event(eventlog.ConditionSkip, eventlog.Notice, g.fields(slot, unit, eventlog.Fields{"FLEXIQ_ERROR": err.Error()}),
		"%s skipped: start_condition not met yet (not a crash, no backoff); retrying every %s", unit, max(cfg.PollInterval, time.Second))
}

// ConditionPassed ends a skip episode after a start (of unit, in slot)
// that went through.
func (g *Gate) ConditionPassed(slot int, unit string) {
	if !g.skipping {
		return
	}
	g.log.Event(eventlog.ConditionSkip, eventlog.Info, g.fields(slot, unit, eventlog.Fields{"FLEXIQ_SKIPS": fmt.Sprint(g.skips)}),
		"start_condition passes: %s started after %d skipped starts", unit, g.skips)
	g.skipping, g.skips, g.retryAt = false, 0, time.Time{}
}

// IsConditionSkip says whether a start's error is a skip by the start
// condition.
func IsConditionSkip(err error) bool { return errors.Is(err, units.ErrConditionSkipped) }

// Held is what holds the starts back, for the explanation of a tick.
type Held struct {
	Deferring  bool
	WaitingFor string // the required units not active
	Skipping   bool   // the start condition said "not yet"
	Skips      int
	Exhausted  bool // the host's budget cut a start short
}

// Held is what holds the starts back now.
func (g *Gate) Held() Held {
	return Held{Deferring: g.deferring, WaitingFor: g.waitingFor, Skipping: g.skipping, Skips: g.skips, Exhausted: g.exhausted}
}

// Surge is Admit for a rollout's n replacements: they wait for the
// required units and the start condition like any start, but are not held
// to the host's budget, since each replaces a worker that then drains
// (max_surge bounds the overlap).
func (g *Gate) Surge(ctx context.Context, now time.Time, cfg *config.Pool, n int) int {
	if !g.ReadyToStart(ctx, now, cfg, n, "rollout") {
		return 0
	}
	return n
}
