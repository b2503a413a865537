package controller

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// panicSource panics in Observe while panicking is set, as a client
// library does on a reply it did not foresee: a runtime error, not a call
// to panic of our own.
type panicSource struct {
	fakeSource
	panicking atomic.Bool
}

func (s *panicSource) Observe(ctx context.Context, now time.Time) (source.Counts, error) {
	if s.panicking.Load() {
		var m map[string]int
		m["boom"]++ // assignment to entry in nil map
	}
	return s.fakeSource.Observe(ctx, now)
}

// Issue 17, item 6: a panic in a source's read is a source error of that
// pool (the process lives), the pool holds at what it has, as for any
// outage, and the stack is logged once, not at every tick.
func TestSourcePanicHolds(t *testing.T) {
	cfg := testPool("p")
	src := &panicSource{}
	log := &bytes.Buffer{}
	clock := &fakeClock{now: monoTime(1000 * time.Hour)}
	sd := newFakeSystemd()
	sd.stopNow = true
	p, err := NewPool(cfg, sd, eventlog.NewWriter(log), Options{
		StateDir: t.TempDir(), Clock: clock.Now,
		NewSource: func(config.Source) (source.Source, error) { return src, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Start(context.Background(), nil)
	src.set(50, 0, nil) // 5 workers' worth at 10 a worker
	for range 10 {
		clock.advance(time.Second)
		p.Tick(context.Background())
	}
	if n := sd.count("active"); n != 5 {
		t.Fatalf("%d active before the panics, want 5", n)
	}
	src.panicking.Store(true)
	// An hour of ticks is well past the scale-down window: only a hold
	// keeps the five.
	for range 60 {
		clock.advance(time.Minute)
		p.Tick(context.Background())
	}
	if n := sd.count("active"); n != 5 {
		t.Errorf("%d active after an hour of panics, want the 5 held", n)
	}
	out := log.String()
	if n := strings.Count(out, "the stack, logged once for this source"); n != 1 {
		t.Errorf("stack logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "goroutine ") || !strings.Contains(out, "panicSource).Observe") {
		t.Errorf("no stack naming the panicking function in the journal:\n%s", out)
	}
	want := "flexiq-sqlite source: panic in Observe: assignment to entry in nil map"
	if !strings.Contains(out, "source unavailable, holding at 5 workers within the pool's bounds: "+want) {
		t.Errorf("no source-error line %q:\n%s", want, out)
	}
	if st := p.Status().String(); !strings.Contains(st, "? pending (") {
		t.Errorf("status during the panics: %q", st)
	}
	// Fixed (a reload, a new server): the pool reads again.
	src.panicking.Store(false)
	src.set(0, 0, nil)
	clock.advance(time.Second)
	p.Tick(context.Background())
	if st := p.Status().String(); !strings.Contains(st, "0 pending") {
		t.Errorf("status after the panics stopped: %q", st)
	}
}

// panicWatchSource panics in Watch.
type panicWatchSource struct{ fakeSource }

func (s *panicWatchSource) Watch(ctx context.Context, wake func()) (string, error) {
	var p *struct{ n int }
	return fmt.Sprint(p.n), nil // nil pointer dereference
}

// A panic in a source's Watch turns its wake-up off, with the panic said;
// the pool polls.
func TestSourceWatchPanicPolls(t *testing.T) {
	_, log := runWatchPool(t, &panicWatchSource{})
	waitFor(t, "journal line saying wake-up is off because of the panic", func() bool {
		return len(lifecycleLines(log, "pool=w wake-up is off, polling every 1h0m0s: flexiq-sqlite source: panic in Watch: runtime error: invalid memory address or nil pointer dereference")) == 1
	})
	waitFor(t, "the stack, once", func() bool {
		return strings.Count(log.String(), "the stack, logged once for this source") == 1
	})
}

// The watcher's own reports reach the journal: wake-up lost, and active
// again.
func TestWatchLostAndRestoredLogged(t *testing.T) {
	src := newWatchSource(nil)
	_, log := runWatchPool(t, src)
	_, ctx := src.waitWatched(t)
	ev := source.WatchEventsOf(ctx)
	if ev.Lost == nil || ev.Restored == nil {
		t.Fatal("Watch's context carries no WatchEvents")
	}
	ev.Lost(errorString("redis source redis://127.0.0.1:6379: keyspace notifications: EOF"))
	ev.Restored("keyspace notifications on redis://127.0.0.1:6379")
	waitFor(t, "the lost and restored lines", func() bool {
		return len(lifecycleLines(log, "pool=w wake-up is lost, polling every 1h0m0s until it is back: redis source redis://127.0.0.1:6379: keyspace notifications: EOF")) == 1 &&
			len(lifecycleLines(log, "pool=w wake-up is active again: keyspace notifications on redis://127.0.0.1:6379")) == 1
	})
}

type errorString string

func (e errorString) Error() string { return string(e) }
