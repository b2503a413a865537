package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// hangSource is a source whose reads hang until their context ends.
type hangSource struct {
	reading atomic.Int32 // reads in flight
	closed  atomic.Bool
}

func (s *hangSource) Observe(ctx context.Context, now time.Time) (source.Counts, error) {
	s.reading.Add(1)
	defer s.reading.Add(-1)
	<-ctx.Done()
	return source.Counts{}, ctx.Err()
}

func (s *hangSource) Close() error { s.closed.Store(true); return nil }

// The operator's operations and the readers never wait for a source read:
// with a read hanging, pause, pin, resume, roll, a reload and status all
// answer at once; a reload that replaces the source gives the hung read up
// and ticks on the new source at once.
func TestOperatorNeverWaitsForTheSource(t *testing.T) {
	hung, good := &hangSource{}, &fakeSource{}
	good.set(25, 0, nil)
	srcs := []source.Source{hung, good}
	cfg := testPool("work")
	cfg.PollInterval = 30 * time.Second // the read's timeout too
	next := 0
	p, err := NewPool(cfg, newFakeSystemd(), eventlog.NewWriter(&syncBuffer{}), Options{
		StateDir: t.TempDir(), OverrideDir: t.TempDir(),
		NewSource: func(config.Source) (source.Source, error) {
			s := srcs[next]
			next++
			return s, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Start(context.Background(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		p.Run(ctx)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()
	faster := *cfg
	faster.MaxWorkers++ // the same source: a reload that only kicks a tick
	if err := p.Update(&faster); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a read in flight", func() bool { return hung.reading.Load() == 1 })

	quick := func(what string, f func()) {
		t.Helper()
		t0 := time.Now()
		f()
		if took := time.Since(t0); took > 2*time.Second {
			t.Errorf("%s took %s behind a hung source read", what, took)
		}
	}
	quick("pause", func() {
		if o, err := p.SetOverride(api.Override{Kind: api.OverridePaused}); err != nil || o.Kind != api.OverridePaused {
			t.Errorf("pause: %+v, %v", o, err)
		}
	})
	if got := p.Status().Mode; got != "paused" {
		t.Errorf("status mode after pause %q, want paused", got)
	}
	quick("pin", func() {
		if _, err := p.SetOverride(api.Override{Kind: api.OverridePinned, Workers: 2}); err != nil {
			t.Error(err)
		}
	})
	quick("resume", func() {
		if _, err := p.SetOverride(api.Override{}); err != nil {
			t.Error(err)
		}
	})
	quick("roll", func() { p.Roll("test") })
	quick("status", func() { _ = p.View(); _ = p.Explain(0); _ = p.Status() })
	if hung.reading.Load() != 1 {
		t.Fatal("the hung read ended before the reload: the test proves nothing")
	}

	fixed := faster
	fixed.Source.Settings = source.FlexiqSQLiteSettings{Path: "/var/lib/other.db"}
	quick("reload", func() {
		if err := p.Update(&fixed); err != nil {
			t.Fatal(err)
		}
	})
	// 25 pending at 10 per worker: 3 workers, from a tick on the new
	// source, long before the old read's 30 s timeout.
	waitFor(t, "a tick on the new source", func() bool {
		st := p.Status()
		return st.PendingKnown && st.Pending == 25 && st.Current == 3
	})
	waitFor(t, "the hung read to end", func() bool { return hung.reading.Load() == 0 })
	waitFor(t, "the replaced source closed", hung.closed.Load)
}

// With no loop running, the caller owns the pool for its call, and an
// operation asked for while the loop runs is run by the loop: both give
// the same answer.
func TestDoWithAndWithoutLoop(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.start(r.pool)
	if _, err := r.pool.SetOverride(api.Override{Kind: api.OverridePinned, Workers: 3}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		r.pool.Run(ctx)
		close(done)
	}()
	_, err := r.pool.SetOverride(api.Override{Kind: api.OverridePinned, Workers: 11})
	if err == nil {
		t.Error("a pin above max_workers was taken by the loop")
	}
	if o := r.pool.pub.Override(); o.Kind != api.OverridePinned || o.Workers != 3 {
		t.Errorf("override %+v, want the pin at 3 kept", o)
	}
	cancel()
	<-done
	if _, err := r.pool.SetOverride(api.Override{}); err != nil {
		t.Fatal(err)
	}
	if o := r.pool.pub.Override(); o.Kind != api.OverrideNone {
		t.Errorf("override %+v after resume without a loop", o)
	}
}
