// Package watch is a pool's wake-up: the watch of its source (a source
// that can tell when work arrives wakes the pool's loop early, at most
// once per Gap), and the sources a reload replaced, closed once their
// watch has ended. The pool's owner alone uses a Watch; it kicks the loop
// through the function it is given.
package watch

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// Gap is the least time between two early ticks that a source's
// wake-ups cause: at most one extra tick per 250 ms. A busy queue writes its
// store many times a second (every insert, claim and completion), and each
// tick lists the pool's units over D-Bus; 250 ms keeps a burst's first worker
// well under a second away while bounding that cost at four ticks a second.
// The first wake-up after a quiet spell ticks at once; later ones within the
// gap are folded into one tick at its end, so no wake-up is lost, only
// merged.
const Gap = 250 * time.Millisecond

// NoWakeEnv, when set to anything but "", turns event-driven wake-up off for
// every pool: the pools poll only. It exists to measure what wake-up buys
// (bench/burst-latency.sh); there is no reason to set it otherwise.
const NoWakeEnv = "FLEXIQ_SCALED_NO_WAKE"

// Watch is the wake-up of the source the pool is watching, and the
// sources a reload replaced, which it closes once their wake-up has ended.
// Only the pool's owner touches it.
type Watch struct {
	log   *eventlog.Logger
	clock func() time.Time
	wake  func()        // a source's wake-up: fleetWake's
	src   source.Source // the source being watched; nil before the first
	// retired are sources replaced by a reload, closed once their wake-up
	// has ended.
	retired []source.Source
	cancel  context.CancelFunc
}

// New is the wake-up of a pool whose loop wake kicks; clock is the pool's.
func New(log *eventlog.Logger, clock func() time.Time, wake func()) Watch {
	return Watch{log: log, clock: clock, wake: wake}
}

// Retire keeps a source a reload replaced, for rewatch to close.
func (w *Watch) Retire(src source.Source) { w.retired = append(w.retired, src) }

// TakeRetired hands over the sources not yet closed, for the pool's Close.
func (w *Watch) TakeRetired() []source.Source {
	r := w.retired
	w.retired = nil
	return r
}

// Rewatch starts the wake-up of src, polled every poll, if it is not the
// one being watched: when Run starts, and after a reload that replaced it
// (Update swaps the pool's source and kicks the loop, which comes back
// here). The old source's watch ends with its context.
func (w *Watch) Rewatch(ctx context.Context, src source.Source, poll time.Duration) {
	if src == w.src {
		return
	}
	w.Stop()
	// A read of a retired source still running was given up (its context
	// ended) by the reload: closing the source ends it too, should the
	// source not honour its context.
	for _, old := range w.retired {
		old.Close()
	}
	w.retired = nil
	w.src = src
	sw, ok := source.As[source.Watcher](src)
	if !ok {
		w.log.Event(eventlog.Lifecycle, eventlog.Info, nil,
			"wake-up is off: its source has no way to tell when work arrives; polling every %s", poll)
		return
	}
	if os.Getenv(NoWakeEnv) != "" {
		w.log.Event(eventlog.Lifecycle, eventlog.Info, nil,
			"wake-up is off: %s is set; polling every %s", NoWakeEnv, poll)
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	wctx = source.WithWatchEvents(wctx, watchEvents(w.log, poll))
	events := make(chan struct{}, 1)
	wake := func() {
		select {
		case events <- struct{}{}:
		default: // one pending wake-up covers this one
		}
	}
	log, clock, kick := w.log, w.clock, w.wake
	// Watch should return at once, but a network source may take a round
	// trip to find out whether it can watch: the loop never waits for it.
	go func() {
		how, err := sw.Watch(wctx, wake)
		if err != nil {
			if wctx.Err() == nil {
				log.Event(eventlog.Lifecycle, eventlog.Warning, nil,
					"wake-up is off, polling every %s: %v", poll, err)
			}
			return
		}
		log.Event(eventlog.Lifecycle, eventlog.Info, nil,
			"wake-up is active: %s; at most one extra tick per %s, polling every %s as the fallback", how, Gap, poll)
		relayWakes(wctx, events, clock, kick)
	}()
}

// Stop ends the current source's wake-up, if any.
func (w *Watch) Stop() {
	if w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
}

// relayWakes turns the source's wake-ups into kicks of the pool's loop, at
// most one per Gap, until ctx ends.
func relayWakes(ctx context.Context, events <-chan struct{}, clock func() time.Time, kick func()) {
	lim := wakeLimiter{gap: Gap}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	waiting := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-events:
			now := clock()
			due := lim.wake(now)
			if !due.After(now) {
				kick()
				lim.fire(now)
			} else if !waiting {
				timer.Reset(due.Sub(now))
				waiting = true
			}
		case <-timer.C:
			waiting = false
			kick()
			lim.fire(clock())
		}
	}
}

// wakeLimiter spaces kicks at least gap apart. It does no I/O and reads no
// clock, so that its rule is table-tested.
type wakeLimiter struct {
	gap  time.Duration
	last time.Time // the last kick; zero before the first
	due  time.Time // the pending kick; zero when none is pending
}

// wake notes a wake-up at now, and returns when the kick that covers it is
// due: now after a quiet spell, else gap after the last kick. A kick already
// pending covers it too, since the tick it causes reads the store after it.
func (l *wakeLimiter) wake(now time.Time) time.Time {
	if !l.due.IsZero() {
		return l.due
	}
	l.due = now
	if !l.last.IsZero() {
		if next := l.last.Add(l.gap); now.Before(next) {
			l.due = next
		}
	}
	return l.due
}

// fire notes that the pending kick was made at now.
func (l *wakeLimiter) fire(now time.Time) {
	l.last, l.due = now, time.Time{}
}

// watchEvents reports, to the journal, what the source's watcher learns
// after Watch returned: its connection lost, and wake-up active again.
func watchEvents(log *eventlog.Logger, poll fmt.Stringer) source.WatchEvents {
	return source.WatchEvents{
		Lost: func(err error) {
			log.Event(eventlog.Lifecycle, eventlog.Warning, nil,
				"wake-up is lost, polling every %s until it is back: %v", poll, err)
		},
		Restored: func(how string) {
			log.Event(eventlog.Lifecycle, eventlog.Info, nil,
				"wake-up is active again: %s", how)
		},
	}
}
