package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock moves only when told; At channels fire once Now reaches them.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) At(t time.Time) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{t, ch})
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// scripted is a check whose results a test sets in advance, one per
// attempt ('p' pass, 'f' fail, then passes), and which counts its calls.
type scripted struct {
	mu     sync.Mutex
	script string
	calls  int
}

func (s *scripted) check(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.calls
	s.calls++
	if i < len(s.script) && s.script[i] == 'f' {
		return fmt.Errorf("attempt %d failed", i)
	}
	return nil
}

func (s *scripted) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// rig is a Prober on a fake clock whose attempts the test waits for.
type rig struct {
	t     *testing.T
	clock *fakeClock
	p     *Prober
	done  chan string
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t, clock: &fakeClock{now: time.Unix(1_000_000, 0)}, done: make(chan string, 64)}
	r.p = newProber(r.clock, 16, 0)
	r.p.afterAttempt = func(id string) { r.done <- id }
	t.Cleanup(r.p.Close)
	return r
}

// attempted waits (as a guard against a hang, not a timing assertion) for
// the next finished attempt and returns its target.
func (r *rig) attempted() string {
	r.t.Helper()
	select {
	case id := <-r.done:
		return id
	case <-time.After(10 * time.Second):
		r.t.Fatal("no attempt finished")
		return ""
	}
}

func (r *rig) transition() (Transition, bool) {
	select {
	case tr := <-r.p.Transitions():
		return tr, true
	default:
		return Transition{}, false
	}
}

// attemptTimes is when Add's comment says a target's attempts come: a new
// one right after its initial delay, then at its jitter, then every
// period; an adopted ready one at its jitter, then every period.
func attemptTimes(start time.Time, spec Spec, id string, initial State, n int) []time.Time {
	j := jitter(id, spec.Period)
	var times []time.Time
	if initial == Ready {
		times = append(times, start.Add(j))
	} else {
		first := start.Add(spec.InitialDelay)
		times = append(times, first, first.Add(j))
	}
	for len(times) < n {
		times = append(times, times[len(times)-1].Add(spec.Period))
	}
	return times[:n]
}

func TestProberThresholds(t *testing.T) {
	const period = time.Second
	tests := []struct {
		name             string
		success, failure int
		initial          State
		script           string
		want             map[int]State // attempt index → the transition it causes
	}{
		{"ready after two passes", 2, 3, Unknown, "pp", map[int]State{1: Ready}},
		{"failures before ready send nothing", 1, 1, Unknown, "fffp", map[int]State{3: Ready}},
		{"not ready after three failures, back after two passes", 2, 3, Unknown, "ppfffpp",
			map[int]State{1: Ready, 4: NotReady, 6: Ready}},
		{"a pass between failures resets the count", 1, 2, Unknown, "pfpffp",
			map[int]State{0: Ready, 4: NotReady, 5: Ready}},
		{"adopted ready keeps its state", 1, 3, Ready, "ppff", map[int]State{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			s := &scripted{script: tc.script}
			spec := Spec{Period: period, Timeout: period / 2, SuccessThreshold: tc.success, FailureThreshold: tc.failure, InitialDelay: 3 * time.Second}
			if err := r.p.Add(Target{ID: "web@1", Check: s.check, Spec: spec, Initial: tc.initial}); err != nil {
				t.Fatal(err)
			}
			start := r.clock.Now()
			times := attemptTimes(start, spec, "web@1", tc.initial, len(tc.script))
			r.p.mu.Lock()
			next := r.p.targets["web@1"].next
			r.p.mu.Unlock()
			if !next.Equal(times[0]) {
				t.Fatalf("first attempt due at %v, want %v", next, times[0])
			}
			var failStart time.Time
			for i := range tc.script {
				r.clock.Advance(times[i].Sub(r.clock.Now()))
				if id := r.attempted(); id != "web@1" {
					t.Fatalf("attempt %d on %q", i, id)
				}
				if tc.script[i] == 'f' && (i == 0 || tc.script[i-1] != 'f') {
					failStart = r.clock.Now()
				}
				tr, got := r.transition()
				want, wantOK := tc.want[i]
				if got != wantOK || (got && tr.To != want) {
					t.Fatalf("after attempt %d: transition %+v (sent %v), want %v (sent %v)", i, tr, got, want, wantOK)
				}
				if got && tr.To == NotReady && (!tr.NotReadySince.Equal(failStart) || tr.Err == nil) {
					t.Errorf("NotReady transition %+v, want NotReadySince %v and the failure", tr, failStart)
				}
			}
			if s.n() != len(tc.script) {
				t.Errorf("%d attempts, want %d", s.n(), len(tc.script))
			}
			st, ok := r.p.Status("web@1")
			if !ok || (st.State == Unknown && !st.NotReadySince.Equal(start)) {
				t.Errorf("Status = %+v, %v; an unknown target is not ready since it was added (%v)", st, ok, start)
			}
		})
	}
}

func TestProberRemoveStopsProbing(t *testing.T) {
	r := newRig(t)
	spec := Spec{Period: time.Second, Timeout: time.Second / 2}
	a, b := &scripted{}, &scripted{}
	for id, s := range map[string]*scripted{"a": a, "b": b} {
		if err := r.p.Add(Target{ID: id, Check: s.check, Spec: spec}); err != nil {
			t.Fatal(err)
		}
	}
	// Both fire once at once (no initial delay), then once more within
	// a period (their jitter).
	for i := range 2 {
		if i > 0 {
			r.clock.Advance(spec.Period)
		}
		r.attempted()
		r.attempted()
	}
	if !r.p.Remove("a") || r.p.Remove("a") {
		t.Fatal("Remove: want true once, then false")
	}
	before := a.n()
	for range 3 {
		r.clock.Advance(spec.Period)
		if id := r.attempted(); id != "b" {
			t.Fatalf("attempt on %q after its removal", id)
		}
	}
	r.p.Close()
	r.p.attempts.Wait() // every attempt started has ended, so a stray one has counted
	if a.n() != before || b.n() != 5 {
		t.Errorf("calls: a %d (want %d), b %d (want 5)", a.n(), before, b.n())
	}
	if _, ok := r.p.Status("a"); ok {
		t.Error("Status of a removed target: want not found")
	}
}

func TestProberJitterSpreadsTargets(t *testing.T) {
	// No hook: new targets fire at once, and nothing waits for them.
	p := newProber(&fakeClock{now: time.Unix(1_000_000, 0)}, 256, 0)
	defer p.Close()
	spec := Spec{Period: time.Second, Timeout: time.Second / 2}
	first := map[time.Duration]int{}
	for i := range 200 {
		id := fmt.Sprintf("web@%d", i)
		if err := p.Add(Target{ID: id, Check: func(context.Context) error { return nil }, Spec: spec}); err != nil {
			t.Fatal(err)
		}
		first[jitter(id, spec.Period).Truncate(100*time.Millisecond)]++
	}
	// 200 targets in ten 100 ms slices: none should hold more than a
	// third of them (uniform is 20 each).
	for slot, n := range first {
		if n > 66 {
			t.Errorf("%d of 200 targets first fire in slice %v", n, slot)
		}
	}
}

func TestProberAddErrorsAndPanics(t *testing.T) {
	r := newRig(t)
	ok := func(context.Context) error { return nil }
	for _, tg := range []Target{
		{ID: "", Check: ok},
		{ID: "x"},
		{ID: "x", Check: ok, Spec: Spec{Period: time.Second, Timeout: 2 * time.Second}},
	} {
		if err := r.p.Add(tg); err == nil {
			t.Errorf("Add(%+v): want an error", tg)
		}
	}
	boom := func(context.Context) error { panic("boom") }
	spec := Spec{Period: time.Second, Timeout: time.Second / 2, FailureThreshold: 1}
	if err := r.p.Add(Target{ID: "p", Check: boom, Spec: spec, Initial: Ready}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(spec.Period)
	r.attempted()
	tr, sent := r.transition()
	if !sent || tr.To != NotReady || tr.Err == nil || !strings.Contains(tr.Err.Error(), "panicked: boom") {
		t.Fatalf("a panicking check: transition %+v (sent %v), want NotReady with the panic", tr, sent)
	}
}

func TestWakeAt(t *testing.T) {
	base := time.Unix(1_000_000, 0) // a multiple of every quantum below
	tests := []struct {
		next    time.Duration
		quantum time.Duration
		want    time.Duration
	}{
		{0, Quantum, 0},
		{time.Nanosecond, Quantum, Quantum},
		{Quantum - 1, Quantum, Quantum},
		{Quantum, Quantum, Quantum},
		{Quantum + 1, Quantum, 2 * Quantum},
		{1234, 0, 1234},
	}
	for _, tc := range tests {
		if got := wakeAt(base.Add(tc.next), tc.quantum); !got.Equal(base.Add(tc.want)) {
			t.Errorf("wakeAt(+%v, %v) = +%v, want +%v", tc.next, tc.quantum, got.Sub(base), tc.want)
		}
	}
}

// A target with a StartPeriod is attempted at that period until it is
// first ready, then at its Spec.Period (issue 29: a woken pool's replica is
// admitted within StartPeriod of its readiness).
func TestProberStartPeriod(t *testing.T) {
	r := newRig(t)
	s := &scripted{script: "fffpp"}
	spec := Spec{Period: time.Second, Timeout: 50 * time.Millisecond, SuccessThreshold: 1, FailureThreshold: 3}
	if err := r.p.Add(Target{ID: "web@1", Check: s.check, Spec: spec, StartPeriod: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	start := r.clock.Now()
	j := jitter("web@1", 100*time.Millisecond)
	// Right away, at the jitter, then every 100 ms until the pass (the
	// attempt already scheduled then included); then every second.
	want := []time.Time{start, start.Add(j), start.Add(j + 100*time.Millisecond), start.Add(j + 200*time.Millisecond),
		start.Add(j + 300*time.Millisecond)}
	for i, at := range want {
		r.p.mu.Lock()
		next := r.p.targets["web@1"].next
		r.p.mu.Unlock()
		if !next.Equal(at) {
			t.Fatalf("attempt %d due at +%v, want +%v", i, next.Sub(start), at.Sub(start))
		}
		r.clock.Advance(at.Sub(r.clock.Now()))
		r.attempted()
	}
	if tr, ok := r.transition(); !ok || tr.To != Ready {
		t.Errorf("no transition to ready: %+v", tr)
	}
	r.p.mu.Lock()
	next := r.p.targets["web@1"].next
	r.p.mu.Unlock()
	if want := start.Add(j + 1300*time.Millisecond); !next.Equal(want) {
		t.Errorf("once ready, next attempt due at +%v, want +%v", next.Sub(start), want.Sub(start))
	}
}

// A target still starting with a StartPeriod below the quantum is woken
// for at its exact due time, not on the quantum's grain (which would make
// a 25 ms StartPeriod a 100 ms one), even behind a target due earlier; a
// ready one, or one without a StartPeriod, stays on the grain.
func TestProberHurriedWake(t *testing.T) {
	for _, tc := range []struct {
		name        string
		startPeriod time.Duration
		wantExact   bool
	}{
		{"starting, 25 ms", 25 * time.Millisecond, true},
		{"starting, at the quantum", Quantum, false},
		{"no start period", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_000_000, 0).Add(3 * time.Millisecond)}
			done := make(chan string, 64)
			p := newProber(clock, 16, Quantum)
			p.afterAttempt = func(id string) { done <- id }
			t.Cleanup(p.Close)
			spec := Spec{Period: time.Second, Timeout: 10 * time.Millisecond, SuccessThreshold: 1, FailureThreshold: 3}
			fail := func(context.Context) error { return errors.New("not yet") }
			// A slow target due first: the grain alone would wake at the
			// quantum after it.
			if err := p.Add(Target{ID: "slow", Check: fail, Spec: spec, Initial: Ready}); err != nil {
				t.Fatal(err)
			}
			if err := p.Add(Target{ID: "web@1", Check: fail, Spec: spec, StartPeriod: tc.startPeriod}); err != nil {
				t.Fatal(err)
			}
			select { // its first attempt is at once
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("no first attempt")
			}
			p.mu.Lock()
			next := p.targets["web@1"].next
			p.mu.Unlock()
			// The scheduler's next wait, as a guard against a hang (not a
			// timing assertion): a waiter at web@1's exact due time, or
			// none but on the grain.
			deadline := time.Now().Add(200 * time.Millisecond)
			if tc.wantExact {
				deadline = time.Now().Add(10 * time.Second)
			}
			for {
				var exact, offGrain bool
				clock.mu.Lock()
				for _, w := range clock.waiters {
					exact = exact || w.at.Equal(next)
					offGrain = offGrain || !w.at.Equal(wakeAt(w.at, Quantum))
				}
				n := len(clock.waiters)
				clock.mu.Unlock()
				if tc.wantExact && exact {
					return
				}
				if !tc.wantExact && offGrain {
					t.Fatalf("a wait off the quantum's grain for a target not hurried (web@1 due at %v)", next)
				}
				if time.Now().After(deadline) {
					if tc.wantExact {
						t.Fatalf("%d waits, none at web@1's due time %v", n, next)
					}
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}
