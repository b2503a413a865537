package source

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 17, item 16: after an outage, the watcher retries as soon as a read
// of the source succeeds again, not when its doubled backoff runs out; it
// reports the loss of an active wake-up and its return, once each; a panic
// in a session ends that session only.
func TestWatchLoopRearm(t *testing.T) {
	// A backoff far longer than the test: any retry within it is the rearm's.
	defer func(lo, hi time.Duration) { watchBackoffMin, watchBackoffMax = lo, hi }(watchBackoffMin, watchBackoffMax)
	watchBackoffMin, watchBackoffMax = time.Minute, time.Hour

	var mu sync.Mutex
	var lost []error
	var restored []string
	ctx, cancel := context.WithCancel(WithWatchEvents(context.Background(), WatchEvents{
		Lost:     func(err error) { mu.Lock(); lost = append(lost, err); mu.Unlock() },
		Restored: func(how string) { mu.Lock(); restored = append(restored, how); mu.Unlock() },
	}))
	defer cancel()
	r := newRearm()
	calls := make(chan int, 10)
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchLoop(ctx, "fake", r, false, func() string { return "fake events" }, func(ctx context.Context, active func()) error {
			n++
			calls <- n
			switch n {
			case 1: // subscribed, then the server goes away mid-session
				active()
				var m map[string]int
				m["x"] = 1
			case 2: // still down
				return errors.New("connection refused")
			}
			active() // back
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	next := func(within time.Duration) (int, bool) {
		select {
		case c := <-calls:
			return c, true
		case <-time.After(within):
			return 0, false
		}
	}
	if c, ok := next(5 * time.Second); !ok || c != 1 {
		t.Fatalf("first session: %d %v", c, ok)
	}
	// A good read with no failed read before it is no cue.
	r.ok()
	if c, ok := next(300 * time.Millisecond); ok {
		t.Fatalf("session %d started without an outage's end", c)
	}
	r.failed() // the source's reads fail too...
	r.ok()     // ...and then succeed: retry now
	if c, ok := next(5 * time.Second); !ok || c != 2 {
		t.Fatalf("no retry at the first good read after the outage (got %d %v)", c, ok)
	}
	// Session 2 failed: the backoff (a minute) again, until the next cue.
	if c, ok := next(300 * time.Millisecond); ok {
		t.Fatalf("session %d started with no cue", c)
	}
	r.failed()
	r.ok()
	if c, ok := next(5 * time.Second); !ok || c != 3 {
		t.Fatalf("no retry at the second cue (got %d %v)", c, ok)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		l, rs := append([]error(nil), lost...), append([]string(nil), restored...)
		mu.Unlock()
		if len(rs) == 1 || time.Now().After(deadline) {
			var pe *PanicError
			if len(l) != 1 || !errors.As(l[0], &pe) || !strings.Contains(l[0].Error(), "assignment to entry in nil map") {
				t.Errorf("lost reports %v, want one, the session's panic", l)
			}
			if len(rs) != 1 || rs[0] != "fake events" {
				t.Errorf("restored reports %q, want one", rs)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not end with its context")
	}
}
