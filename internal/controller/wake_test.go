package controller

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/watch"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// watchSource is a fake source that can watch: it counts its reads (one per
// tick) and hands the test its wake function.
type watchSource struct {
	fakeSource
	reads    atomic.Int64
	watchErr error
	mu       sync.Mutex
	wake     func()
	ctx      context.Context
	watched  chan struct{}
}

func newWatchSource(err error) *watchSource {
	return &watchSource{watchErr: err, watched: make(chan struct{})}
}

func (s *watchSource) Observe(ctx context.Context, now time.Time) (source.Counts, error) {
	s.reads.Add(1)
	return s.fakeSource.Observe(ctx, now)
}

func (s *watchSource) Watch(ctx context.Context, wake func()) (string, error) {
	s.mu.Lock()
	s.wake, s.ctx = wake, ctx
	s.mu.Unlock()
	close(s.watched)
	if s.watchErr != nil {
		return "", s.watchErr
	}
	return "fake events on /q", nil
}

// waitWatched waits for Watch to be called and returns its wake function
// and context.
func (s *watchSource) waitWatched(t *testing.T) (func(), context.Context) {
	t.Helper()
	select {
	case <-s.watched:
	case <-time.After(5 * time.Second):
		t.Fatal("the pool never called Watch")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wake, s.ctx
}

// syncBuffer is a journal that the pool's goroutines may write while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// runWatchPool runs a pool that polls once an hour, on the sources given in
// order (the first at start, the next after each reload that changes the
// source), so that any tick it makes within the test comes from a wake-up.
func runWatchPool(t *testing.T, srcs ...source.Source) (*Pool, *syncBuffer) {
	t.Helper()
	cfg := testPool("w")
	cfg.PollInterval = time.Hour
	log := &syncBuffer{}
	next := 0
	p, err := NewPool(cfg, newFakeSystemd(), eventlog.NewWriter(log), Options{
		StateDir: t.TempDir(),
		NewSource: func(config.Source) (source.Source, error) {
			s := srcs[next]
			next++
			return s, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		p.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return p, log
}

// waitFor polls cond for up to 5 s: generous, as the machine is noisy; the
// poll interval it beats is an hour.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 5 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func lifecycleLines(log *syncBuffer, sub string) []string {
	var out []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

func TestWakeTicksEarly(t *testing.T) {
	src := newWatchSource(nil)
	_, log := runWatchPool(t, src)
	wake, _ := src.waitWatched(t)
	waitFor(t, "journal line saying wake-up is active", func() bool {
		return len(lifecycleLines(log, "pool=w wake-up is active: fake events on /q")) == 1
	})
	before := src.reads.Load()
	wake()
	waitFor(t, "tick after a wake-up", func() bool { return src.reads.Load() > before })

	// A stream of wake-ups for a second makes at most one extra tick per
	// watch.Gap (noise can only make fewer).
	before = src.reads.Load()
	start := time.Now()
	for time.Since(start) < time.Second {
		wake()
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	time.Sleep(2 * watch.Gap) // the last pending kick
	ticks := src.reads.Load() - before
	limit := int64(elapsed/watch.Gap) + 2
	if ticks < 2 || ticks > limit {
		t.Errorf("a second of wake-ups made %d ticks, want between 2 and %d", ticks, limit)
	}
}

func TestWakeWatchError(t *testing.T) {
	src := newWatchSource(errors.New("fake: notifications are off on the server"))
	_, log := runWatchPool(t, src)
	src.waitWatched(t)
	waitFor(t, "journal line saying why wake-up is off", func() bool {
		return len(lifecycleLines(log, "pool=w wake-up is off, polling every 1h0m0s: fake: notifications are off on the server")) == 1
	})
}

func TestWakeSourceWithoutWatch(t *testing.T) {
	_, log := runWatchPool(t, &fakeSource{})
	waitFor(t, "journal line saying wake-up is off", func() bool {
		return len(lifecycleLines(log, "pool=w wake-up is off: its source has no way to tell when work arrives")) == 1
	})
}

func TestWakeOffByEnvironment(t *testing.T) {
	t.Setenv(watch.NoWakeEnv, "1")
	src := newWatchSource(nil)
	_, log := runWatchPool(t, src)
	waitFor(t, "journal line saying wake-up is off", func() bool {
		return len(lifecycleLines(log, "pool=w wake-up is off: "+watch.NoWakeEnv+" is set")) == 1
	})
	select {
	case <-src.watched:
		t.Error("Watch was called with wake-up turned off")
	case <-time.After(100 * time.Millisecond):
	}
}

// A reload that replaces the source watches the new one and ends the old
// one's watch; one that keeps the source keeps its watch.
func TestWakeAfterReload(t *testing.T) {
	first, second := newWatchSource(nil), newWatchSource(nil)
	p, log := runWatchPool(t, first, second)
	_, firstCtx := first.waitWatched(t)

	same := *p.cfg
	same.MaxWorkers++
	if err := p.Update(&same); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if firstCtx.Err() != nil {
		t.Fatal("a reload that kept the source ended its watch")
	}

	changed := same
	changed.Source.Settings = source.FlexiqSQLiteSettings{Path: "/var/lib/other.db"}
	if err := p.Update(&changed); err != nil {
		t.Fatal(err)
	}
	wake, _ := second.waitWatched(t)
	waitFor(t, "end of the old source's watch", func() bool { return firstCtx.Err() != nil })
	waitFor(t, "second journal line saying wake-up is active", func() bool {
		return len(lifecycleLines(log, "wake-up is active")) == 2
	})
	before := second.reads.Load()
	wake()
	waitFor(t, "tick after the new source's wake-up", func() bool { return second.reads.Load() > before })
}
