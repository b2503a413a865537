package controller

// The pool's owner. One goroutine at a time may touch the pool's state: the
// loop (Run) while it runs, else whoever holds the owner's token for the
// length of one call (Start before the loop, Drain and Close after it,
// tests that call Tick themselves). An operation asked for while the loop
// runs is a message on its inbox, which the loop takes between two steps
// of a tick, never while the tick waits for its source: that read runs in
// a goroutine of its own, on the source and the configuration it was
// handed, and the loop goes on serving messages until its answer comes.

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
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
		p.storeSnapshot()
	case p.own.inbox <- msg:
		<-done
	}
}

// serviceChanged publishes a service pool's ready set after one of its
// messages (a readiness transition, the end of after-change commands),
// and what status shows.
func (p *Pool) serviceChanged(ctx context.Context) {
	now := p.clock()
	p.workers.publishReady(ctx, now)
	changed := p.publish(nil, nil)
	p.buildView(now, p.pub.listed, nil)
	p.storeSnapshot()
	p.notify(changed)
}

// pendingRead is a tick waiting for its source read.
type pendingRead struct {
	run    tickRun
	gen    uint64 // the source's number (Pool.srcGen) when the read began
	cancel context.CancelFunc
	done   chan observed // buffered: a read given up never blocks
}

// Run ticks until ctx ends. A reload that changes the interval wakes it, so
// that the new interval holds from then on rather than after the old one. A
// source that can tell when work arrives wakes it early (see wake.go).
// Meanwhile it runs the operator's operations (do) as they come, also while
// a tick waits for its source.
func (p *Pool) Run(ctx context.Context) {
	p.own.token <- struct{}{}
	defer func() { <-p.own.token }()
	timer := time.NewTimer(p.cfg.PollInterval)
	defer timer.Stop()
	defer p.stopWatch()
	defer p.abandonRead()
	for {
		p.rewatch(ctx)
		// While a tick waits for its source, neither the timer nor a
		// wake-up starts another: they wait, as they did for a tick.
		var fire <-chan time.Time
		var wake <-chan struct{}
		var read <-chan observed
		if p.reading == nil {
			fire, wake = timer.C, p.wake
		} else {
			read = p.reading.done
		}
		select {
		case <-ctx.Done():
			return
		case f := <-p.own.inbox:
			f()
			continue
		case t, ok := <-p.workers.svc.transitions():
			if ok {
				p.workers.onTransition(t)
				p.serviceChanged(ctx)
			}
			continue
		case d := <-p.workers.svcDone():
			p.workers.commandsFinished(ctx, p.clock(), d)
			p.serviceChanged(ctx)
			continue
		case <-p.workers.svc.guardC():
			if p.workers.guardRound(p.clock()) {
				p.serviceChanged(ctx)
			}
			continue
		case <-p.workers.svc.relistC():
			p.workers.checkNotify(ctx)
			p.serviceChanged(ctx)
			continue
		case obs := <-read:
			p.endRead(ctx, obs)
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

// beginRead runs the first phase of a tick and starts its source read off
// the loop. It returns false when the tick ended there (a draining pool,
// no unit list).
func (p *Pool) beginRead(ctx context.Context) bool {
	run := p.beginTick(ctx)
	if run.done {
		p.ticked(p.finishTick(run, run.hold, false))
		return false
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &pendingRead{run: run, gen: p.srcGen, cancel: cancel, done: make(chan observed, 1)}
	read := p.tickReader()
	go func() {
		r.done <- read(rctx)
	}()
	p.reading = r
	p.storeSnapshot()
	return true
}

// endRead finishes the tick whose source read has answered.
func (p *Pool) endRead(ctx context.Context, obs observed) {
	r := p.reading
	p.reading = nil
	r.cancel()
	if r.gen != p.srcGen {
		// Read from a source a reload has replaced: abandonRead should
		// have dropped it; never act on it.
		return
	}
	d, changed := p.endTick(ctx, r.run, obs)
	p.ticked(p.finishTick(r.run, d, changed))
}

// abandonRead gives up the read in flight, if any: its context ends (which
// ends a read that honours it), and its answer, should one still come, is
// dropped with its channel. The tick it belonged to ends there.
func (p *Pool) abandonRead() {
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
	rep := p.tickReport(d, time.Since(run.start))
	p.storeSnapshot()
	return tickDone{rep, changed}
}

// ticked tells the daemon of a finished tick; the caller need not own the
// pool.
func (p *Pool) ticked(t tickDone) {
	if p.opts.OnTick != nil {
		p.opts.OnTick(t.report)
	}
	p.progress.Store(time.Now().UnixNano())
	p.notify(t.changed)
}
