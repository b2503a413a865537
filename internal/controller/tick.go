package controller

import (
	"context"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Tick runs one control cycle.
func (p *Pool) Tick(ctx context.Context) policy.Decision {
	start := time.Now()
	p.mu.Lock()
	p.lastObs = lastObservation{}
	d, changed := p.tick(ctx, p.clock())
	rep := p.tickReport(d, time.Since(start))
	p.mu.Unlock()
	if p.opts.OnTick != nil {
		p.opts.OnTick(rep)
	}
	p.progress.Store(time.Now().UnixNano())
	p.notify(changed)
	return d
}

func (p *Pool) tick(ctx context.Context, now time.Time) (policy.Decision, bool) {
	hold := policy.Decision{Now: now, Action: policy.Hold, Current: len(p.fleet.live), Desired: len(p.fleet.live)}
	if p.stopping {
		hold.Rationale = "hold: draining"
		return hold, false
	}
	listed, err := p.list(ctx)
	if err != nil {
		// Without the unit list the current count is unknown: act on nothing.
		p.log.Event(eventlog.Lifecycle, eventlog.Warning, p.fields(nil), "pool=%s cannot list workers: %v", p.name, err)
		hold.Rationale = "hold: cannot list workers"
		return hold, false
	}
	p.expireOverride(p.wallNow())
	r := p.fleet.reconcile(now, listed)
	p.apply(ctx, now, r)
	p.quietStep(ctx, now)
	// A worker stopped from outside (an admin's systemctl stop) is a
	// scale-down by hand, not a crash: replacing it at once would only
	// start a worker that the decision below may drain again. The policy
	// decides whether the pool needs it back (min_workers, demand).
	p.target = max(0, p.target-len(r.stopping))
	// Crashed workers come back first, up to the last decided target.
	p.startUpTo(ctx, now, p.target, "replacing crashed worker")
	p.sampleCPU(now, listed)

	obs := policy.Observation{Current: len(p.fleet.live)}
	counts, srcErr := p.observe(ctx, now)
	params := p.cfg.PolicyParams()
	params.ThreadsPerWorker = p.threadsPerWorker(ctx)
	if srcErr == nil {
		obs.Valid, obs.Pending = true, counts.Pending
		obs.OldestAge, obs.OldestKnown = counts.OldestAge, counts.HasOldest
		obs.Running = runningOnLive(counts.Running, len(p.fleet.draining), params.ThreadsPerWorker)
	}
	obs.CPU, obs.CPUKnown = p.meanUtil()
	if srcErr == nil {
		p.observeDemand(ctx, params, &obs)
	}
	d := p.decide(ctx, now, params, obs, counts)
	wall := p.wallNow()
	e := explain(wall, d, params, obs, counts, srcErr)
	d = p.applyOverride(wall, d, e)
	if p.dryRun() {
		p.wouldScale(d, e)
	}
	finishExplanation(e, d, p.modeString(wall))
	if p.dryRun() {
		p.target = d.Desired
		d.Action = policy.Hold // nothing below acts
	} else {
		p.report.decision(d, obs, counts, srcErr == nil, len(p.fleet.draining))
	}

	switch d.Action {
	case policy.ScaleUp:
		p.target = d.Desired
		p.startUpTo(ctx, now, d.Desired, "scale-up")
	case policy.ScaleDown:
		p.target = d.Desired
		p.drainDownTo(ctx, now, d.Desired)
	case policy.Stable:
		p.target = d.Desired
	}
	p.acted(now, d)
	addReadiness(e, p.ready)
	if !p.dryRun() {
		p.rolloutStep(ctx, now)
	}
	p.recount()
	p.saveState(now)
	var c *source.Counts
	if srcErr == nil {
		c = &counts
	}
	p.health.record(wall, c, srcErr)
	changed := p.publish(c, srcErr)
	p.buildView(now, listed, e)
	return d, changed
}

func (p *Pool) list(ctx context.Context) ([]units.Worker, error) {
	lctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return p.units.ListWorkers(lctx, p.name)
}

// observe reads the queue, bounded by the tick interval so that a slow
// database delays this pool only, and logs failures without flooding.
func (p *Pool) observe(ctx context.Context, now time.Time) (source.Counts, error) {
	timeout := min(max(p.cfg.PollInterval, time.Second), 30*time.Second)
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Sources stamp ages and due times with the wall clock, as the queue
	// does; the controller's own clock is monotonic.
	counts, err := p.src.Observe(sctx, time.Now())
	p.lastObs = lastObservation{counts: counts, valid: err == nil, err: err}
	if err != nil {
		p.report.sourceFailed(now, err, len(p.fleet.live))
		return counts, err
	}
	p.report.sourceOK(counts)
	return counts, nil
}

// runningOnLive is R as the policy means it: the jobs running on the live
// workers. The queue also counts the jobs that draining workers are
// finishing; counted against the live workers alone, they would look like an
// overload right after every scale-down and undo it at once. A draining
// worker holds at most threads_per_worker of them.
func runningOnLive(running int64, draining, threadsPerWorker int) int64 {
	return max(0, running-int64(draining*threadsPerWorker))
}

// shortError is the first line of err, cut to fit a status line.
func shortError(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	if r := []rune(s); len(r) > 80 {
		s = string(r[:77]) + "..."
	}
	return s
}
