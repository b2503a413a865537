package controller

// Acting jobs: the calls to systemd that a tick decides on (start a
// worker, stop one, reset a failed unit), run off the pool's loop, as its
// source reads are. The loop emits a job and goes on serving the operator;
// the call runs in a goroutine of its own, at most maxCalls of a pool's at
// once; its result comes back to the loop as a message, and the job's done
// runs there, as the pool's owner. A job that may be superseded (a start)
// and that is still waiting for its turn when the operator changes what
// the pool is asked for (a pin, a pause, a reload) is dropped unsent: the
// next tick decides again on what was asked last. A call already sent is
// never dropped: systemd acts on it, and its result is what the pool
// knows of the unit.
//
// Nothing here knows the pool: a job is two closures, its call (off the
// loop: it touches nothing of the pool) and its done (on the loop).

import (
	"context"
	"sync"
	"sync/atomic"
)

// maxCalls bounds a pool's calls to systemd in flight. systemd runs its
// jobs one at a time anyway; the bound keeps a scale-up of hundreds from
// queueing hundreds of calls on the bus at once, and leaves room for
// enough of them that PID 1 is never idle waiting for the next.
const maxCalls = 64

// jobKind is what a job does, for the snapshot's counts.
type jobKind int

const (
	jobStart jobKind = iota
	jobStop
	jobOther // resets, the ends of quiet phases' signals
	jobKinds
)

// job is one call to systemd.
type job struct {
	kind jobKind
	// supersedable: dropped unsent when the runner's generation moves on
	// before the job's turn comes.
	supersedable bool
	gen          uint64
	// call runs off the loop, on values captured when the job was made.
	call func(ctx context.Context)
	// done runs on the loop once the call has returned, or at once when
	// the job was dropped unsent (sent false); nil is nothing to do.
	done func(sent bool)
}

// finished is a job whose done is due.
type finished struct {
	j    *job
	sent bool
}

// runner runs a pool's jobs. submit, apply, settle and the counts are the
// owner's; the goroutines only append to out.
type runner struct {
	sem chan struct{}
	gen atomic.Uint64

	mu  sync.Mutex
	out []finished
	// ready holds a value while out may hold jobs to apply.
	ready chan struct{}

	inFlight int           // emitted, not yet applied
	byKind   [jobKinds]int // the same, by kind
}

func newRunner() *runner {
	return &runner{sem: make(chan struct{}, maxCalls), ready: make(chan struct{}, 1)}
}

// submit emits j: its call runs as soon as fewer than maxCalls are in
// flight. Owner only.
func (r *runner) submit(ctx context.Context, j *job) {
	j.gen = r.gen.Load()
	r.inFlight++
	r.byKind[j.kind]++
	go func() {
		sent := false
		select {
		case r.sem <- struct{}{}:
			if !j.supersedable || j.gen == r.gen.Load() {
				sent = true
				j.call(ctx)
			}
			<-r.sem
		case <-ctx.Done():
		}
		r.mu.Lock()
		r.out = append(r.out, finished{j, sent})
		r.mu.Unlock()
		select {
		case r.ready <- struct{}{}:
		default:
		}
	}()
}

// supersede drops the supersedable jobs that have not been sent yet. Any
// goroutine may call it; the owner does, when the operator's ask changes.
func (r *runner) supersede() { r.gen.Add(1) }

// apply runs the done of every job whose call has returned, and says
// whether there was any. Owner only.
func (r *runner) apply() bool {
	r.mu.Lock()
	out := r.out
	r.out = nil
	r.mu.Unlock()
	for _, f := range out {
		r.inFlight--
		r.byKind[f.j.kind]--
		if f.j.done != nil {
			f.j.done(f.sent)
		}
	}
	return len(out) > 0
}

// settle waits for every job in flight and applies it, those that the
// applied ones emit too: an owner outside the loop (Start, Drain, a test's
// Tick) returns with the pool's acting done, as it did when it acted
// itself. It says whether any job was applied.
func (r *runner) settle() bool {
	any := false
	for r.inFlight > 0 {
		<-r.ready
		any = r.apply() || any
	}
	return any
}

// idle says whether no job is in flight. Owner only.
func (r *runner) idle() bool { return r.inFlight == 0 }

// count is how many jobs of kind are in flight. Owner only.
func (r *runner) count(k jobKind) int { return r.byKind[k] }
