package controller

// The pool's owner. One goroutine at a time may touch the pool's state: the
// loop (Run) while it runs, else whoever holds the owner's token for the
// length of one call (Start before the loop, Drain and Close after it,
// tests that call Tick themselves). An operation asked for while the loop
// runs is a message on its inbox, which the loop takes between two steps
// of a tick, never while the tick waits for systemd or its source: the
// tick's calls (the listing of the pool's units, the source's reads) run
// in a goroutine of their own, on values they were handed, and so do the
// starts and stops the tick decides on (package acting). The loop goes on serving
// messages until their answers come back to it, as messages too.
//
// The goroutines of a pool, then:
//
//	the loop (Run)      the pool's state: ticks' decisions, operations,
//	                    the answers below, the snapshot
//	the tick's calls    one per tick: the listing and the source's reads
//	the acting jobs     one per start, stop or reset, at most acting.MaxCalls
//	                    at once; a start not yet sent is dropped when the
//	                    operator's ask changes meanwhile
//	the service's       the prober, discovery's after-change commands
//	                    (service.go, publish.go), answering on channels
//
// A tick begins only once the last one's jobs have all come back: its
// listing then shows what they did.

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/controller/decide"
	"github.com/flexiq/flexiq-scaled/internal/controller/snapshot"
	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// owner hands the pool's state to one goroutine at a time.
type owner struct {
	// token is held by the owner: the loop for as long as it runs, or a
	// caller for the length of its call.
	token chan struct{}
	// inbox carries the operations asked for while the loop runs.
	// Unbuffered: a message sent has been taken by the loop, which runs it
	// before anything else.
	inbox chan func()
}

func newOwner() owner {
	return owner{token: make(chan struct{}, 1), inbox: make(chan func())}
}

// do runs f as the pool's owner and publishes what it changed: in the loop
// when it runs (between two ticks, or while a tick waits for its source),
// else in the caller's goroutine, which is the owner meanwhile.
func (p *Pool) do(f func()) {
	done := make(chan struct{})
	msg := func() {
		defer close(done)
		f()
		p.storeSnapshot()
	}
	select {
	case p.own.token <- struct{}{}:
		defer func() { <-p.own.token }()
		f()
		// Outside the loop, the caller's acting is done when it returns.
		if p.acting.Settle() {
			p.serviceChanged(context.Background())
		}
		p.storeSnapshot()
	case p.own.inbox <- msg:
		<-done
	}
}

// serviceChanged publishes a service pool's ready set after one of the loop's
// messages (a readiness transition, the end of after-change commands, the
// results of acting jobs: workers that started or failed to), and what
// status shows.
func (p *Pool) serviceChanged(ctx context.Context) {
	// Connections held at the wake address go to a replica as soon as it
	// is admitted, not after the publish's files and commands.
	p.cold.note(p.cfg, p.workers)
	now := p.clock()
	p.workers.Svc.PublishReady(ctx, now)
	changed := p.pub.Publish(p.facts(now), nil, nil, p.pub.Listed(), nil)
	p.storeSnapshot()
	p.tell.changed(changed)
}

// settleOutside waits for the jobs in flight when the owner is not the
// loop (Start, Drain, a test's Tick): there, acting is done when the step
// that acted returns, as it was when the pool called systemd itself. In
// the loop it does nothing: the results come back as messages.
func (p *Pool) settleOutside() {
	if !p.inLoop {
		p.acting.Settle()
	}
}

// pendingRead is a tick waiting for its calls: the listing and the
// source's reads.
type pendingRead struct {
	run    tickRun
	gen    uint64 // the source's number (Pool.srcGen) when the read began
	cancel context.CancelFunc
	done   chan tickCalls // buffered: a read given up never blocks
}

// Run ticks until ctx ends. A reload that changes the interval wakes it, so
// that the new interval holds from then on rather than after the old one. A
// source that can tell when work arrives wakes it early (package watch).
// Meanwhile it runs the operator's operations (do) as they come, also while
// a tick waits for its source.
func (p *Pool) Run(ctx context.Context) {
	p.own.token <- struct{}{}
	p.inLoop = true
	defer func() {
		p.inLoop = false
		<-p.own.token
	}()
	timer := time.NewTimer(p.cfg.PollInterval)
	defer timer.Stop()
	defer p.watch.Stop()
	defer p.abandonRead()
	for {
		p.watch.Rewatch(ctx, p.src, p.cfg.PollInterval)
		// While a tick waits for its source, neither the timer nor a
		// wake-up starts another: they wait, as they did for a tick.
		// Nor while the last tick's jobs are in flight: the next
		// listing must show what they did.
		var fire <-chan time.Time
		var wake <-chan struct{}
		var read <-chan tickCalls
		if p.reading != nil {
			read = p.reading.done
		} else if p.acting.Idle() && p.parked == nil {
			fire, wake = timer.C, p.wake
		}
		select {
		case <-ctx.Done():
			return
		case f := <-p.own.inbox:
			f()
			continue
		case t, ok := <-p.workers.Svc.Transitions():
			if ok {
				p.workers.Svc.OnTransition(t)
				p.serviceChanged(ctx)
			}
			continue
		case d := <-p.workers.Svc.SvcDone():
			p.workers.Svc.CommandsFinished(ctx, p.clock(), d)
			p.serviceChanged(ctx)
			continue
		case <-p.workers.Svc.GuardC():
			if p.workers.Svc.GuardRound(p.clock()) {
				p.serviceChanged(ctx)
			}
			continue
		case <-p.workers.Svc.RelistC():
			p.workers.Svc.CheckNotify(ctx)
			p.serviceChanged(ctx)
			continue
		case <-p.acting.Ready():
			if p.acting.Apply() {
				p.serviceChanged(ctx)
			}
			p.unpark(ctx)
			continue
		case c := <-read:
			p.endRead(ctx, c)
			timer.Reset(p.cfg.PollInterval)
			continue
		case <-fire:
		case <-wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		if !p.beginRead(ctx) {
			timer.Reset(p.cfg.PollInterval)
		}
	}
}

// beginRead runs the first phase of a tick and starts its calls off the
// loop. It returns false when the tick ended there (a draining pool).
func (p *Pool) beginRead(ctx context.Context) bool {
	run := p.beginTick(ctx)
	if run.done {
		p.tell.ticked(p.finishTick(run, run.hold, false))
		return false
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &pendingRead{run: run, gen: p.srcGen, cancel: cancel, done: make(chan tickCalls, 1)}
	go func() {
		r.done <- run.calls(rctx)
	}()
	p.reading = r
	p.storeSnapshot()
	return true
}

// endRead finishes the tick whose calls have answered.
func (p *Pool) endRead(ctx context.Context, c tickCalls) {
	r := p.reading
	p.reading = nil
	r.cancel()
	if r.gen != p.srcGen {
		// Read from a source a reload has replaced: abandonRead should
		// have dropped it; never act on it.
		return
	}
	if !p.tickListed(ctx, &r.run, c.listing) {
		p.tell.ticked(p.finishTick(r.run, r.run.hold, false))
		return
	}
	p.parked = &parkedTick{run: r.run, gen: r.gen, obs: c.obs}
	if !p.acting.Idle() {
		p.serviceChanged(ctx) // status shows the replacements starting
	}
	p.unpark(ctx)
}

// parkedTick is a tick whose listing has been taken in, waiting for the
// jobs it caused (replacements) before it decides.
type parkedTick struct {
	run tickRun
	gen uint64
	obs decide.Observed
}

// unpark ends the parked tick once no job is in flight.
func (p *Pool) unpark(ctx context.Context) {
	t := p.parked
	if t == nil || !p.acting.Idle() {
		return
	}
	p.parked = nil
	if t.gen != p.srcGen {
		// Its read is of a source a reload has replaced: the reload's
		// tick decides instead.
		return
	}
	d, changed := p.endTick(ctx, &t.run, t.obs)
	p.tell.ticked(p.finishTick(t.run, d, changed))
}

// abandonRead gives up the read in flight, if any, and the tick parked
// with its read: its context ends (which ends a read that honours it), and
// its answer, should one still come, is dropped with its channel. The tick
// it belonged to ends there.
func (p *Pool) abandonRead() {
	p.parked = nil // its read is of the same source
	if p.reading == nil {
		return
	}
	p.reading.cancel()
	p.reading = nil
}

// tickDone is what a finished tick tells the daemon.
type tickDone struct {
	report  api.TickReport
	changed bool
}

// finishTick ends a tick as its owner: the report and the snapshot.
func (p *Pool) finishTick(run tickRun, d policy.Decision, changed bool) tickDone {
	rep := snapshot.TickReport(p.facts(run.now), d, time.Since(run.start), p.lastObs)
	p.storeSnapshot()
	return tickDone{rep, changed}
}
