package controller

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/controller/decide"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Drain stops every worker of the pool and waits until systemd reports every
// one of its units gone. It re-lists while it waits, so that a worker whose
// start was still pending, or that started meanwhile, is stopped too.
func (p *Pool) Drain(ctx context.Context, why string) {
	dry := false
	var dec decide.Decider
	p.do(func() {
		dry, dec = dryRun(p.cfg), p.dec
		p.stopWhy = why
		// A dry-run pool's workers were never the daemon's to stop.
		p.workers.Stopping = true
		if !dry {
			p.workers.Target = 0
		}
	})
	if dry {
		p.log.Event(eventlog.Lifecycle, eventlog.Info, nil, "is in dry-run: leaving its units as they are (%s)", why)
		return
	}
	// A fleet host hands its share to the others before its workers go.
	dec.Leave(ctx)
	for ctx.Err() == nil {
		var done, changed bool
		p.do(func() { done, changed = p.drainStep(ctx, why) })
		p.tell.changed(changed)
		if done {
			// A drained pool has nothing left to carry across a restart.
			p.state.remove()
			// The fleet's last heartbeat (at Close) says so too: the
			// store keeps no count of workers that are gone.
			p.do(func() { p.dec.Ticked(p.src) })
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
	listed, err := p.workers.List(ctx)
	// A cancelled drain (its pool was added back) stops nothing more:
	// the units may be the new pool's by now.
	if err == nil && ctx.Err() == nil {
		p.workers.StopAll(ctx, now, listed, why)
		p.settleOutside()
	}
	done = err == nil && p.workers.Live() == 0 && p.workers.Draining() == 0 && !anyLoaded(listed)
	return done, p.pub.Summarise(p.facts(p.clock()), nil, nil)
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
