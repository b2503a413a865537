package source

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// WatchEvents receives what a watcher's goroutine learns after Watch has
// returned, for the journal: that wake-up was lost (its connection failed;
// polling covers the gap) and that it is active again. The controller puts
// them in the context it gives Watch (WithWatchEvents); either may be nil.
// They are called from the watcher's goroutine and must not block.
type WatchEvents struct {
	Lost     func(err error)
	Restored func(how string)
}

type watchEventsKey struct{}

// WithWatchEvents returns ctx carrying ev, for Watch.
func WithWatchEvents(ctx context.Context, ev WatchEvents) context.Context {
	return context.WithValue(ctx, watchEventsKey{}, ev)
}

// WatchEventsOf returns the WatchEvents in ctx, or none.
func WatchEventsOf(ctx context.Context) WatchEvents {
	ev, _ := ctx.Value(watchEventsKey{}).(WatchEvents)
	return ev
}

// Bounds of a watcher's retries: 1 s doubling to 30 s, so that a server
// that is down is not hammered; a rearm (a successful read by the source's
// Observe after a failure) cuts a wait short, since the server is back.
// Variables, for the tests.
var (
	watchBackoffMin = time.Second
	watchBackoffMax = 30 * time.Second
)

// rearm is how a source's reads tell its watcher that the server answers
// again. Observe calls ok or failed after each read; the first success
// after a failure sends one token, which a watcher waiting out its backoff
// takes as the cue to retry at once.
type rearm struct {
	ch      chan struct{}
	failing atomic.Bool
}

func newRearm() *rearm { return &rearm{ch: make(chan struct{}, 1)} }

// failed notes a failed read.
func (r *rearm) failed() { r.failing.Store(true) }

// ok notes a successful read, and signals the watcher if reads were failing.
func (r *rearm) ok() {
	if r.failing.Swap(false) {
		select {
		case r.ch <- struct{}{}:
		default: // one token covers it
		}
	}
}

// watchLoop runs a watcher's sessions until ctx ends: session connects,
// calls active once it listens (subscribed, LISTENing), relays events, and
// returns when its connection fails, with why. Between sessions it waits
// out the backoff, or less when rearm signals. A panic in a session is
// recovered and ends that session like a failure. It reports to ctx's
// WatchEvents when an active session is lost and when a later one is
// active again; lost says whether to count the start as lost (Watch could
// not reach the server, and said it would retry), so that the first
// success is reported too. how describes the watch, for the report.
func watchLoop(ctx context.Context, typ string, r *rearm, lost bool, how func() string,
	session func(ctx context.Context, active func()) error) {
	ev := WatchEventsOf(ctx)
	backoff := watchBackoffMin
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for ctx.Err() == nil {
		wasActive := false
		err := runSession(ctx, typ, session, func() {
			wasActive = true
			backoff = watchBackoffMin
			if lost {
				lost = false
				if ev.Restored != nil {
					ev.Restored(how())
				}
			}
		})
		if ctx.Err() != nil {
			return
		}
		if wasActive && !lost {
			lost = true
			if ev.Lost != nil {
				if err == nil {
					err = fmt.Errorf("%s source: the wake-up's connection ended", typ)
				}
				ev.Lost(err)
			}
		}
		timer.Reset(backoff)
		var rearmed <-chan struct{}
		if r != nil {
			rearmed = r.ch
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			backoff = min(2*backoff, watchBackoffMax)
		case <-rearmed:
			if !timer.Stop() {
				<-timer.C
			}
			backoff = watchBackoffMin
		}
	}
}

// runSession runs one session, with its panic recovered into its error.
func runSession(ctx context.Context, typ string, session func(context.Context, func()) error, active func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = recoverIn(ctx, typ, "the wake-up's connection", v)
		}
	}()
	return session(ctx, active)
}
