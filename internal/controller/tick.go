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

// A tick runs in three phases: beginTick, on the loop, takes what the
// tick's calls need; the calls run off the loop when a loop runs (loop.go):
// the listing of the pool's units (acting.go) and the source's reads
// (read.go), side by side; endTick, back on the loop, takes in the listing
// (crashes, stops from outside), decides and acts. Acting emits jobs
// (jobs.go): their calls run off the loop too, and their results come back
// to it as messages. Meanwhile the loop serves the operator.

// tickRun is what the first phase of a tick hands to the last.
type tickRun struct {
	start  time.Time // wall clock, for the tick's duration
	now    time.Time // the pool's clock
	listed []units.Worker
	// done says the tick ended in its first phase, with hold.
	done bool
	hold policy.Decision
	list listPlan
	read func(context.Context) observed
}

// tickCalls are the answers of a tick's calls.
type tickCalls struct {
	listing listing
	obs     observed
}

// calls runs the tick's listing and reads, side by side; they touch
// nothing of the pool.
func (run tickRun) calls(ctx context.Context) tickCalls {
	var c tickCalls
	listed := make(chan listing, 1)
	go func() { listed <- run.list.list(ctx) }()
	c.obs = run.read(ctx)
	c.listing = <-listed
	return c
}

// Tick runs one control cycle, its calls included, as the pool's owner:
// tests drive a pool with it; Run's loop calls off the loop instead.
func (p *Pool) Tick(ctx context.Context) policy.Decision {
	var d policy.Decision
	var t tickDone
	p.do(func() {
		run := p.beginTick(ctx)
		d = run.hold
		changed := false
		if !run.done {
			c := run.calls(ctx)
			if p.tickListed(ctx, &run, c.listing) {
				p.settleOutside()
				d, changed = p.endTick(ctx, &run, c.obs)
			} else {
				d = run.hold
			}
		}
		t = p.finishTick(run, d, changed)
	})
	p.ticked(t)
	return d
}

// beginTick is a tick's first phase.
func (p *Pool) beginTick(ctx context.Context) tickRun {
	now := p.clock()
	run := tickRun{start: time.Now(), now: now}
	p.lastObs = lastObservation{}
	run.hold = policy.Decision{Now: now, Action: policy.Hold, Current: p.workers.live(), Desired: p.workers.live()}
	if p.workers.stopping {
		run.hold.Rationale, run.done = "hold: draining", true
		return run
	}
	run.list, run.read = p.workers.listPlan(), p.tickReader()
	return run
}

// tickListed takes in the tick's listing, before the decision: what
// changed by itself (crashes, stops from outside), and the replacements.
// It says false when there is no listing to act on.
func (p *Pool) tickListed(ctx context.Context, run *tickRun, l listing) bool {
	now := run.now
	if l.err != nil {
		// Without the unit list the current count is unknown: act on nothing.
		p.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "cannot list workers: %v", l.err)
		run.hold.Rationale, run.done = "hold: cannot list workers", true
		return false
	}
	run.listed = l.workers
	p.workers.requiredRead(l)
	p.expireOverride(p.wallNow())
	p.workers.pumpService(ctx, now)
	p.workers.fleet.asOf = l.seq
	r := p.workers.reconcile(ctx, now, l.workers)
	p.workers.fleet.asOf = 0
	p.workers.quietStep(ctx, now)
	// Crashed workers come back first, before the decision.
	p.workers.replaceCrashed(ctx, now, r)
	p.workers.replaceUnready(ctx, now)
	p.workers.publishReady(ctx, now)
	p.checkDegraded(now)
	p.sampleCPU(now, l.workers)
	return true
}

// endTick is a tick's last phase, on what the source read said: the
// decision, and acting on it.
//
// It runs once the jobs that the tick's listing caused (the replacements of
// crashed workers) have come back, so that the decision counts what they
// did, as it counts what the listing found.
func (p *Pool) endTick(ctx context.Context, run *tickRun, read observed) (policy.Decision, bool) {
	now := run.now
	var t tickDecision
	if p.fl != nil {
		lr, ok := p.fl.tickRead(run.start.Add(-p.cfg.PollInterval))
		t = p.fleetDecide(now, lr, ok)
	} else {
		t = p.localDecide(now, read)
	}
	d, changed := p.endTickAct(ctx, *run, t)
	p.publishFleet()
	return d, changed
}

// localDecide is the decision of a pool on its own: the source's read, the
// pool's pipeline.
func (p *Pool) localDecide(now time.Time, read observed) tickDecision {
	obs := policy.Observation{Current: p.workers.live()}
	counts, srcErr := p.observed(now, read)
	params := p.cfg.PolicyParams()
	params.ThreadsPerWorker = p.threadsPerWorker(read.threads)
	if srcErr == nil {
		obs.Valid, obs.Pending = true, counts.Pending
		obs.OldestAge, obs.OldestKnown = counts.OldestAge, counts.HasOldest
		obs.Running = runningOnLive(counts.Running, p.workers.draining(), params.ThreadsPerWorker)
	}
	obs.CPU, obs.CPUKnown = p.meanUtil()
	if srcErr == nil {
		p.observeDemand(read.demand, &obs)
	}
	d := p.decide(now, params, obs, counts, read.prom)
	return tickDecision{d: d, e: explain(p.wallNow(), d, params, obs, counts, srcErr), obs: obs, counts: counts, srcErr: srcErr}
}

// endTickAct is the rest of endTick.
func (p *Pool) endTickAct(ctx context.Context, run tickRun, t tickDecision) (policy.Decision, bool) {
	now := run.now
	d, e, obs, counts, srcErr := t.d, t.e, t.obs, t.counts, t.srcErr
	wall := p.wallNow()
	d = p.applyOverride(wall, d, e)
	d = p.applyWake(wall, d, e)
	if p.dryRun() {
		p.wouldScale(d, e)
	}
	finishExplanation(e, d, p.modeString(wall))
	if p.dryRun() {
		p.workers.target = d.Desired
		d.Action = policy.Hold // nothing below acts
	} else {
		p.report.decision(d, obs, counts, srcErr == nil && !t.unread, p.workers.draining())
	}
	p.act(ctx, now, d)
	p.settleOutside()
	addReadiness(e, p.workers.ready)
	if !p.dryRun() {
		p.workers.rolloutStep(ctx, now)
		p.settleOutside()
	}
	p.workers.publishReady(ctx, now)
	p.workers.recount()
	p.saveState(now)
	var c *source.Counts
	if srcErr == nil && !t.unread {
		c = &counts
	}
	p.health.record(wall, c, srcErr)
	changed := p.publish(c, srcErr)
	p.buildView(now, run.listed, e)
	return d, changed
}

// act follows the decision d.
func (p *Pool) act(ctx context.Context, now time.Time, d policy.Decision) {
	p.workers.scaleTo(ctx, now, d)
	p.acted(now, d)
}

// observed takes the source's reading of this tick: kept for the tick's
// report, its failures logged without flooding.
func (p *Pool) observed(now time.Time, read observed) (source.Counts, error) {
	p.lastObs = lastObservation{counts: read.counts, valid: read.err == nil, err: read.err}
	if read.err != nil {
		p.report.sourceFailed(now, read.err, p.workers.live())
		return read.counts, read.err
	}
	p.report.sourceOK(read.counts)
	return read.counts, nil
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
