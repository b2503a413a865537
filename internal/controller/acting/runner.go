// Package acting runs a pool's acting jobs: the calls to systemd that a
// tick decides on (start a worker, stop one, reset a failed unit), run off
// the pool's loop, as its source reads are. The loop emits a job and goes on serving the operator;
// the call runs in a goroutine of its own, at most MaxCalls of a pool's at
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
package acting

import (
	"context"
	"sync"
	"sync/atomic"
)

// MaxCalls bounds a pool's calls to systemd in flight. systemd runs its
// jobs one at a time anyway; the bound keeps a scale-up of hundreds from
// queueing hundreds of calls on the bus at once, and leaves room for
// enough of them that PID 1 is never idle waiting for the next.
const MaxCalls = 64

// Kind is what a job does, for the snapshot's counts.
type Kind int

const (
	Start Kind = iota
	Stop
	Other // resets, the ends of quiet phases' signals
	kinds
)

// Job is one call to systemd.
type Job struct {
	Kind Kind
	// Supersedable: dropped unsent when the runner's generation moves on
	// before the job's turn comes.
	Supersedable bool
	gen          uint64
	// Call runs off the loop, on values captured when the job was made.
	Call func(ctx context.Context)
	// Done runs on the loop once the call has returned, or at once when
	// the job was dropped unsent (sent false); nil is nothing to do.
	Done func(sent bool)
}

// finished is a job whose done is due.
type finished struct {
	j    *Job
	sent bool
}

// Runner runs a pool's jobs. Submit, Apply, Settle and the counts are the
// owner's; the goroutines only append to out.
type Runner struct {
	sem chan struct{}
	gen atomic.Uint64

	mu  sync.Mutex
	out []finished
	// ready holds a value while out may hold jobs to apply.
	ready chan struct{}

	inFlight int        // emitted, not yet applied
	byKind   [kinds]int // the same, by kind
}

func NewRunner() *Runner {
	return &Runner{sem: make(chan struct{}, MaxCalls), ready: make(chan struct{}, 1)}
}

// Submit emits j: its call runs as soon as fewer than MaxCalls are in
// flight. Owner only.
func (r *Runner) Submit(ctx context.Context, j *Job) {
	j.gen = r.gen.Load()
	r.inFlight++
	r.byKind[j.Kind]++
	go func() {
		sent := false
		select {
		case r.sem <- struct{}{}:
			if !j.Supersedable || j.gen == r.gen.Load() {
				sent = true
				j.Call(ctx)
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

// Ready holds a value while some job's Done may be due: the loop waits
// on it beside its other messages, and calls Apply.
func (r *Runner) Ready() <-chan struct{} { return r.ready }

// Supersede drops the supersedable jobs that have not been sent yet. Any
// goroutine may call it; the owner does, when the operator's ask changes.
func (r *Runner) Supersede() { r.gen.Add(1) }

// Apply runs the done of every job whose call has returned, and says
// whether there was any. Owner only.
func (r *Runner) Apply() bool {
	r.mu.Lock()
	out := r.out
	r.out = nil
	r.mu.Unlock()
	for _, f := range out {
		r.inFlight--
		r.byKind[f.j.Kind]--
		if f.j.Done != nil {
			f.j.Done(f.sent)
		}
	}
	return len(out) > 0
}

// Settle waits for every job in flight and applies it, those that the
// applied ones emit too: an owner outside the loop (Start, Drain, a test's
// Tick) returns with the pool's acting done, as it did when it acted
// itself. It says whether any job was applied.
func (r *Runner) Settle() bool {
	any := false
	for r.inFlight > 0 {
		<-r.ready
		any = r.Apply() || any
	}
	return any
}

// Idle says whether no job is in flight. Owner only.
func (r *Runner) Idle() bool { return r.inFlight == 0 }

// Count is how many jobs of kind are in flight. Owner only.
func (r *Runner) Count(k Kind) int { return r.byKind[k] }
