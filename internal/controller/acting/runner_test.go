package acting

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// A start not yet sent when the operator's ask changes is dropped; one
// already sent is taken in.
func TestRunnerSupersedesUnsentJobs(t *testing.T) {
	r := NewRunner()
	block := make(chan struct{})
	var sent, dropped, entered atomic.Int32
	ctx := context.Background()
	for range MaxCalls {
		r.Submit(ctx, &Job{Kind: Start, Supersedable: true, Call: func(context.Context) { entered.Add(1); <-block },
			Done: func(ok bool) {
				if ok {
					sent.Add(1)
				}
			}})
	}
	waitFor(t, "the bound full", func() bool { return entered.Load() == MaxCalls })
	// The bound is full: these wait for their turn.
	for range 3 {
		r.Submit(ctx, &Job{Kind: Start, Supersedable: true, Call: func(context.Context) { t.Error("a superseded job was sent") },
			Done: func(ok bool) {
				if !ok {
					dropped.Add(1)
				}
			}})
	}
	if r.Count(Start) != MaxCalls+3 {
		t.Errorf("%d starts in flight, want %d", r.Count(Start), MaxCalls+3)
	}
	r.Supersede()
	close(block)
	r.Settle()
	if sent.Load() != MaxCalls || dropped.Load() != 3 || !r.Idle() {
		t.Errorf("sent %d, dropped %d, idle %v; want %d, 3, true", sent.Load(), dropped.Load(), r.Idle(), MaxCalls)
	}
}

// waitFor waits up to 10 s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
