package controller

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/controller/decide"
	"github.com/flexiq/flexiq-scaled/internal/controller/snapshot"
	"github.com/flexiq/flexiq-scaled/internal/controller/workers"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// A tick runs in three phases: beginTick, on the loop, takes what the
// tick's calls need; the calls run off the loop when a loop runs (loop.go):
// the listing of the pool's units (acting.go) and the source's reads
// (decide's Reader), side by side; endTick, back on the loop, takes in the listing
// (crashes, stops from outside), decides and acts. Acting emits jobs
// (package acting): their calls run off the loop too, and their results come back
// to it as messages. Meanwhile the loop serves the operator.

// tickRun is what the first phase of a tick hands to the last.
type tickRun struct {
	start  time.Time // wall clock, for the tick's duration
	now    time.Time // the pool's clock
	listed []units.Worker
	// done says the tick ended in its first phase, with hold.
	done bool
	hold policy.Decision
	list workers.ListPlan
	read func(context.Context) decide.Observed
}

// tickCalls are the answers of a tick's calls.
type tickCalls struct {
	listing workers.Listing
	obs     decide.Observed
}

// calls runs the tick's listing and reads, side by side; they touch
// nothing of the pool.
func (run tickRun) calls(ctx context.Context) tickCalls {
	var c tickCalls
	listed := make(chan workers.Listing, 1)
	go func() { listed <- run.list.List(ctx) }()
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
	p.tell.ticked(t)
	return d
}

// beginTick is a tick's first phase.
func (p *Pool) beginTick(ctx context.Context) tickRun {
	now := p.clock()
	run := tickRun{start: time.Now(), now: now}
	p.lastObs = snapshot.Observation{}
	run.hold = policy.Decision{Now: now, Action: policy.Hold, Current: p.workers.Live(), Desired: p.workers.Live()}
	if p.workers.Stopping {
		run.hold.Rationale, run.done = "hold: draining", true
		return run
	}
	run.list, run.read = p.workers.ListPlan(), p.dec.Reader(p.src)
	return run
}

// tickListed takes in the tick's listing, before the decision: what
// changed by itself (crashes, stops from outside), and the replacements.
// It says false when there is no listing to act on.
func (p *Pool) tickListed(ctx context.Context, run *tickRun, l workers.Listing) bool {
	now := run.now
	if l.Err != nil {
		// Without the unit list the current count is unknown: act on nothing.
		p.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "cannot list workers: %v", l.Err)
		run.hold.Rationale, run.done = "hold: cannot list workers", true
		return false
	}
	run.listed = l.Workers
	p.workers.Ready.RequiredRead(p.workers.Cfg, l.Required, l.ReqErr)
	p.override.Expire(p.wall())
	p.workers.Svc.PumpService(ctx, now)
	p.workers.Slots.AsOf = l.Seq
	r := p.workers.Reconcile(ctx, now, l.Workers)
	p.workers.Slots.AsOf = 0
	p.workers.QuietStep(ctx, now)
	// Crashed workers come back first, before the decision.
	p.workers.ReplaceCrashed(ctx, now, r)
	p.workers.Svc.ReplaceUnready(ctx, now)
	p.workers.Svc.PublishReady(ctx, now)
	p.degraded.check(p, now)
	workers.SampleCPU(p.units, p.cfg, p.workers.Slots, now, l.Workers)
	return true
}

// endTick is a tick's last phase, on what the source read said: the
// decision, and acting on it.
//
// It runs once the jobs that the tick's listing caused (the replacements of
// crashed workers) have come back, so that the decision counts what they
// did, as it counts what the listing found.
func (p *Pool) endTick(ctx context.Context, run *tickRun, read decide.Observed) (policy.Decision, bool) {
	now := run.now
	t := p.dec.Decide(now, run.start, read)
	d, e, obs, counts, srcErr := t.D, t.E, t.Obs, t.Counts, t.SrcErr
	wall := p.wall()
	d = p.override.Apply(wall, d, e, p.workers.Target, p.cfg.MaxWorkers)
	d = p.cold.apply(d, e, p.override.Active(wall), p.cfg.MaxWorkers)
	if dryRun(p.cfg) {
		p.override.WouldScale(d, e)
	}
	decide.Finish(e, d, p.override.Mode(wall, dryRun(p.cfg)))
	if dryRun(p.cfg) {
		p.workers.Target = d.Desired
		d.Action = policy.Hold // nothing below acts
	} else {
		p.report.decision(d, obs, counts, srcErr == nil && !t.Unread, p.workers.Draining())
	}
	p.workers.ScaleTo(ctx, now, d)
	p.dec.Acted(now, d)
	p.settleOutside()
	addReadiness(e, p.workers.Ready.Held())
	if !dryRun(p.cfg) {
		p.workers.RolloutStep(ctx, now)
		p.settleOutside()
	}
	p.workers.Svc.PublishReady(ctx, now)
	p.workers.Recount()
	p.state.saveFrom(now, p.workers, p.dec.Memory(), p.log)
	var c *source.Counts
	if srcErr == nil && !t.Unread {
		c = &counts
	}
	p.health.record(wall, c, srcErr)
	changed := p.pub.Publish(p.facts(now), c, srcErr, run.listed, e)
	p.dec.Ticked(p.src)
	return d, changed
}
