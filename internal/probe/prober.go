package probe

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"
)

// Clock is the Prober's time: Now for the state machine's timestamps (pass
// the controller's clock so that NotReadySince compares with its times),
// At for the scheduler's waits. At takes an instant rather than a duration
// so that a fake clock moved between the scheduler's Now and its wait
// still fires: tests pass a fake that moves only when told, and no unit
// test sleeps.
type Clock interface {
	Now() time.Time
	// At fires once Now is at or past t (at once if it already is).
	At(t time.Time) <-chan time.Time
}

// SystemClock is now (time.Now if nil, or controller.MonotonicClock) with
// real timers.
func SystemClock(now func() time.Time) Clock {
	if now == nil {
		now = time.Now
	}
	return systemClock{now}
}

type systemClock struct{ now func() time.Time }

func (c systemClock) Now() time.Time                  { return c.now() }
func (c systemClock) At(t time.Time) <-chan time.Time { return time.After(t.Sub(c.now())) }

// Target is one replica to probe.
type Target struct {
	ID      string // the caller's key, for example the unit's name
	Check   Check
	Spec    Spec  // its timing fields (after WithDefaults) are used
	Initial State // Unknown for a new replica; Ready for one adopted as ready
	// StartPeriod, when set below Spec.Period, is the period until the
	// target is first ready: a replica that a request waits for (a pool
	// woken from zero, issue 29) is admitted within StartPeriod of its
	// readiness rather than within Spec.Period. Below Quantum, the
	// scheduler wakes for such a target at its exact due time rather than
	// on the quantum's grain (hurried): a wake every StartPeriod for as long
	// as it starts, not for the ready ones.
	StartPeriod time.Duration
}

// Transition is a change of one target's state.
type Transition struct {
	ID            string
	From, To      State
	At            time.Time
	NotReadySince time.Time // see Tracker.NotReadySince
	Err           error     // the last failure, for the journal; nil when To is Ready
}

// Prober probes many targets. One goroutine schedules every target on a
// heap of due times, spreading each target's first attempt over its period
// so that targets added together do not fire together; each attempt runs
// in a goroutine of its own that lives only as long as the attempt, and a
// target has at most one attempt at a time. Transitions arrive, in order
// per target, on Transitions(); the Prober never calls into its caller, so
// the pool's loop can own every pool state and read the channel.
//
// Nothing a replica does can hold the Prober: an attempt fails at its
// timeout even if its check has not returned (a check that ignored its
// context ends in the background, and its target's attempts fail until it
// has: one check per target at most), and Close waits for no attempt.
type Prober struct {
	clock   Clock
	quantum time.Duration
	out     chan Transition
	wake    chan struct{}
	ctx     context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup // the scheduler
	once    sync.Once

	// attempts counts the attempts and their checks still running, which
	// Close does not wait for; tests do.
	attempts sync.WaitGroup
	// sending is held (read) by an attempt while it sends, and by Close
	// (write) to close out once no attempt can send any more.
	sending sync.RWMutex
	closed  bool

	mu      sync.Mutex
	targets map[string]*target
	due     dueHeap

	// afterAttempt, set by tests before any Add, is told of every attempt
	// once its result is recorded, so that a test can step a fake clock
	// attempt by attempt instead of sleeping.
	afterAttempt func(id string)
}

type target struct {
	Target
	tracker  *Tracker
	next     time.Time
	phased   bool // next has been moved by the ID's jitter
	inflight bool
	checking bool // its check runs, maybe past the attempt that began it
	removed  bool
	lastErr  error
	// everReady: it has been ready (or was adopted so); StartPeriod no
	// longer applies.
	everReady bool
}

// period is the time between two attempts of t now.
func (t *target) period() time.Duration {
	if !t.everReady && t.StartPeriod > 0 && t.StartPeriod < t.Spec.Period {
		return t.StartPeriod
	}
	return t.Spec.Period
}

// Quantum is the scheduler's grain: it wakes at multiples of it and starts
// every attempt then due, up to a quantum late (a tenth of MinPeriod).
// Waking the process costs more than an attempt on a kept-alive
// connection: BenchmarkProbe200 measured 200 HTTP probes a second at about
// 5% of a core with a wake per target, 4.6% with 25 ms, and 2.7% with
// 100 ms. Targets still spread over the period, a tenth of them per wake.
const Quantum = 100 * time.Millisecond

// New starts a Prober. buffer is the Transitions channel's capacity: a
// full channel holds back the attempts of the targets whose transition
// waits, and no other.
func New(clock Clock, buffer int) *Prober { return newProber(clock, buffer, Quantum) }

// newProber is New with another quantum; the tests' fake clock uses 0 to
// fire each target at its exact due time.
func newProber(clock Clock, buffer int, quantum time.Duration) *Prober {
	ctx, stop := context.WithCancel(context.Background())
	p := &Prober{
		clock: clock, out: make(chan Transition, buffer), wake: make(chan struct{}, 1),
		ctx: ctx, stop: stop, targets: map[string]*target{}, quantum: quantum,
	}
	p.wg.Add(1)
	go p.schedule()
	return p
}

// Transitions delivers every state change. It is closed by Close. A
// transition of a target removed (or replaced by Add) while it was being
// sent may still arrive: the caller ignores IDs it no longer knows, and
// gives a restarted replica a new ID (its unit's name and start).
func (p *Prober) Transitions() <-chan Transition { return p.out }

// Add starts probing t; an ID already present is replaced (its state
// restarts from t.Initial). A new replica (Initial Unknown or NotReady) is
// first probed right after its initial delay, so that it serves as soon as
// it can; its second attempt then comes a share of the period later, fixed
// by the ID, which sets its phase: replicas started together do not stay
// in step. One adopted as Ready (the daemon restarted) is first probed at
// that share of the period, as Kubernetes does after a kubelet restart,
// so that a restart adopting 200 replicas does not probe them at once.
func (p *Prober) Add(t Target) error {
	t.Spec = t.Spec.WithDefaults()
	switch {
	case p.ctx.Err() != nil:
		return errors.New("probe target: the prober is closed")
	case t.ID == "":
		return errors.New("probe target: empty ID")
	case t.Check == nil:
		return fmt.Errorf("probe target %s: no check", t.ID)
	case t.Spec.Timeout > t.Spec.Period:
		return fmt.Errorf("probe target %s: timeout %v longer than period %v", t.ID, t.Spec.Timeout, t.Spec.Period)
	}
	now := p.clock.Now()
	tg := &target{
		Target:  t,
		tracker: NewTracker(t.Spec.SuccessThreshold, t.Spec.FailureThreshold, t.Initial, now),
		next:    now.Add(t.Spec.InitialDelay),
		// Adopted as ready, it has no start to hurry.
		everReady: t.Initial == Ready,
	}
	if t.Initial == Ready {
		tg.next, tg.phased = now.Add(jitter(t.ID, t.Spec.Period)), true
	}
	p.mu.Lock()
	if old, ok := p.targets[t.ID]; ok {
		old.removed = true
	}
	p.targets[t.ID] = tg
	heap.Push(&p.due, tg)
	p.mu.Unlock()
	p.poke()
	return nil
}

// Remove stops probing id; an attempt in flight is left to finish and its
// result dropped. It reports whether id was there.
func (p *Prober) Remove(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.targets[id]
	if ok {
		t.removed = true
		delete(p.targets, id)
	}
	return ok
}

// Status is one target's readiness, for status and for the caller's
// decision to replace a replica that stays unready.
type Status struct {
	State         State
	NotReadySince time.Time // see Tracker.NotReadySince
	LastErr       error     // the last failed attempt's error, nil if none yet
}

// Status is id's current readiness; ok is false for an unknown id.
func (p *Prober) Status(id string) (s Status, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.targets[id]
	if !ok {
		return Status{}, false
	}
	return Status{State: t.tracker.State(), NotReadySince: t.tracker.NotReadySince(), LastErr: t.lastErr}, true
}

// Len is the number of targets.
func (p *Prober) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.targets)
}

// Close stops the scheduler, cancels the attempts in flight and closes
// Transitions. It waits for no attempt: a reload or a pool's stop that
// closes the Prober must not wait on a replica. The cancelled attempts
// end in the background, each within its check's own bound (the checks
// of this package close their connections when their context ends), and
// send nothing.
func (p *Prober) Close() {
	p.once.Do(func() {
		p.stop()
		p.wg.Wait() // the scheduler, which returns at once
		// An attempt that is sending sees the cancelled context and
		// lets go of the lock.
		p.sending.Lock()
		p.closed = true
		close(p.out)
		p.sending.Unlock()
	})
}

func (p *Prober) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// jitter spreads targets over their period by a hash of the ID rather than
// at random: the spread is as good, and a test knows when each fires. It
// is in (0, period].
func jitter(id string, period time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(id))
	return time.Duration(h.Sum64()%uint64(period)) + 1
}

func (p *Prober) schedule() {
	defer p.wg.Done()
	for {
		wake, ok := p.dispatchDue()
		var timer <-chan time.Time
		if ok {
			timer = p.clock.At(wake)
		}
		select {
		case <-timer:
		case <-p.wake:
		case <-p.ctx.Done():
			return
		}
	}
}

// wakeAt is next rounded up to a multiple of quantum (0: next itself).
func wakeAt(next time.Time, quantum time.Duration) time.Time {
	if quantum <= 0 {
		return next
	}
	if r := next.Truncate(quantum); r.Before(next) {
		return r.Add(quantum)
	}
	return next
}

// hurried says whether t is still starting with a StartPeriod below the
// quantum: a held request may be waiting for it (issue 29), and on the
// quantum's grain a 25 ms StartPeriod would be a 100 ms one, so the
// scheduler wakes for it at its exact due time.
func (t *target) hurried(quantum time.Duration) bool {
	return !t.everReady && t.StartPeriod > 0 && t.StartPeriod < quantum
}

// dispatchDue starts every due attempt and returns when to wake next: the
// next due time on the quantum's grain, or a hurried target's exact one
// when that is sooner.
func (p *Prober) dispatchDue() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for p.due.Len() > 0 {
		t := p.due[0]
		if t.removed {
			heap.Pop(&p.due)
			continue
		}
		if t.next.After(now) {
			return p.wakeFor(t.next), true
		}
		// Fixed rate from the phase the jitter set; rounds missed while the
		// daemon was busy (or an attempt still ran) are skipped, not made up.
		if !t.phased {
			t.next, t.phased = t.next.Add(jitter(t.ID, t.period())), true
		}
		for !t.next.After(now) {
			t.next = t.next.Add(t.period())
		}
		heap.Fix(&p.due, 0)
		if !t.inflight && p.ctx.Err() == nil {
			t.inflight = true
			p.attempts.Add(1)
			go p.attempt(t)
		}
	}
	return time.Time{}, false
}

// wakeFor is when to wake for the next attempt, due at next: on the
// quantum's grain, unless a hurried target is due before that. The scan
// is of the targets in the heap (a few hundred at most), once per wake.
func (p *Prober) wakeFor(next time.Time) time.Time {
	wake := wakeAt(next, p.quantum)
	for _, t := range p.due {
		if !t.removed && t.hurried(p.quantum) && t.next.Before(wake) {
			wake = t.next
		}
	}
	return wake
}

func (p *Prober) attempt(t *target) {
	defer p.attempts.Done()
	err := p.check(t)
	p.mu.Lock()
	if t.removed || p.ctx.Err() != nil {
		// Dropped; while closing, a cancelled attempt says nothing about
		// the replica.
		p.mu.Unlock()
		p.finish(t)
		return
	}
	if err != nil {
		t.lastErr = err
	}
	now := p.clock.Now()
	from, changed := t.tracker.Observe(err == nil, now)
	tr := Transition{ID: t.ID, From: from, To: t.tracker.State(), At: now, NotReadySince: t.tracker.NotReadySince()}
	if tr.To == Ready {
		t.everReady = true
	}
	if tr.To != Ready {
		tr.Err = t.lastErr
	}
	p.mu.Unlock()
	if changed {
		// Outside the lock, so a slow reader holds back only this target.
		p.sending.RLock()
		if !p.closed {
			select {
			case p.out <- tr:
			case <-p.ctx.Done():
			}
		}
		p.sending.RUnlock()
	}
	p.finish(t)
}

// lateAnswer is how long past its timeout an attempt waits for its check's
// own error (a check that honours its context returns at once, and says
// more than "timed out") before it fails without it.
const lateAnswer = 50 * time.Millisecond

// check runs t's check, bounded by its timeout whatever the check does: a
// check still running then is left to end in the background, and until it
// has, t's attempts fail without starting another.
func (p *Prober) check(t *target) error {
	p.mu.Lock()
	if t.checking {
		p.mu.Unlock()
		return fmt.Errorf("the previous attempt's check has still not returned (timeout %v)", t.Spec.Timeout)
	}
	t.checking = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, t.Spec.Timeout)
	result := make(chan error, 1)
	p.attempts.Add(1)
	go func() {
		defer p.attempts.Done()
		err := safeCheck(ctx, t.Check)
		cancel()
		p.mu.Lock()
		t.checking = false
		p.mu.Unlock()
		result <- err
	}()
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
	}
	late := time.NewTimer(lateAnswer)
	defer late.Stop()
	select {
	case err := <-result:
		return err
	case <-late.C:
		return fmt.Errorf("no answer within the timeout (%v); the check goes on in the background", t.Spec.Timeout)
	}
}

// finish lets t's next attempt start once this one is wholly done (its
// transition sent), which keeps transitions in order per target.
func (p *Prober) finish(t *target) {
	p.mu.Lock()
	t.inflight = false
	hook := p.afterAttempt
	p.mu.Unlock()
	if hook != nil {
		hook(t.ID)
	}
}

// safeCheck turns a panic in a check (an executor's, or a bug of ours)
// into a failed attempt: one replica must not take down the daemon.
func safeCheck(ctx context.Context, c Check) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("probe panicked: %v", r)
		}
	}()
	return c(ctx)
}

// dueHeap orders targets by their next attempt.
type dueHeap []*target

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(*target)) }
func (h *dueHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}
