package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// hungSystemd is the fake systemd whose calls hang, as they do while PID 1
// is stopped, until release: starts once startsHang is set, listings once
// listsHang is.
type hungSystemd struct {
	*fakeSystemd
	startsHang, listsHang atomic.Bool
	inStart               atomic.Int32 // starts waiting
	gate                  chan struct{}
	once                  sync.Once
}

func newHungSystemd() *hungSystemd {
	return &hungSystemd{fakeSystemd: newFakeSystemd(), gate: make(chan struct{})}
}

func (h *hungSystemd) release() { h.once.Do(func() { close(h.gate) }) }

func (h *hungSystemd) wait(ctx context.Context) error {
	select {
	case <-h.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *hungSystemd) ListWorkers(ctx context.Context, pool string) ([]units.Worker, error) {
	if h.listsHang.Load() {
		if err := h.wait(ctx); err != nil {
			return nil, err
		}
	}
	return h.fakeSystemd.ListWorkers(ctx, pool)
}

func (h *hungSystemd) StartWorker(ctx context.Context, s units.WorkerSpec) error {
	if h.startsHang.Load() {
		h.inStart.Add(1)
		defer h.inStart.Add(-1)
		if err := h.wait(ctx); err != nil {
			return err
		}
	}
	return h.fakeSystemd.StartWorker(ctx, s)
}

// The operator never waits for systemd: with a scale-up's starts hung in
// PID 1, and the next listings too, pause, pin, unpin and status answer at
// once, status shows the starts in flight, and once systemd answers the
// pool converges to the pin asked last, no slot started twice.
func TestOperatorNeverWaitsForSystemd(t *testing.T) {
	src := &fakeSource{}
	src.set(30, 0, nil) // 3 workers at 10 per worker
	cfg := testPool("work")
	cfg.MinWorkers, cfg.MaxWorkers = 0, 5
	cfg.PollInterval = time.Hour // ticks come from the operator's kicks only
	sd := newHungSystemd()
	defer sd.release()
	p, err := NewPool(cfg, sd, eventlog.NewWriter(&syncBuffer{}), Options{
		StateDir: t.TempDir(), OverrideDir: t.TempDir(),
		NewSource: func(config.Source) (source.Source, error) { return src, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Start(context.Background(), nil)
	sd.startsHang.Store(true)
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
	again := *cfg
	again.MaxWorkers++ // a reload that only kicks a tick
	if err := p.Update(&again); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 starts in flight", func() bool { return sd.inStart.Load() == 3 })
	sd.listsHang.Store(true)

	quick := func(what string, f func()) {
		t.Helper()
		t0 := time.Now()
		f()
		if took := time.Since(t0); took > 2*time.Second {
			t.Errorf("%s took %s behind a hung systemd", what, took)
		}
	}
	quick("status", func() {
		if v := p.View(); v.Workers.Starting != 3 || v.Workers.Live != 0 {
			t.Errorf("status shows %d starting and %d live, want 3 and 0", v.Workers.Starting, v.Workers.Live)
		}
	})
	quick("pause", func() {
		if _, err := p.SetOverride(api.Override{Kind: api.OverridePaused}); err != nil {
			t.Error(err)
		}
	})
	quick("pin", func() {
		if _, err := p.SetOverride(api.Override{Kind: api.OverridePinned, Workers: 4}); err != nil {
			t.Error(err)
		}
	})
	quick("unpin", func() {
		if _, err := p.SetOverride(api.Override{}); err != nil {
			t.Error(err)
		}
	})
	quick("pin again", func() {
		if _, err := p.SetOverride(api.Override{Kind: api.OverridePinned, Workers: 1}); err != nil {
			t.Error(err)
		}
	})
	if got := p.Status().Mode; got != "pinned at 1" && got != "pinned" {
		t.Logf("mode %q", got)
	}
	if sd.inStart.Load() != 3 {
		t.Fatal("the starts ended before the operator's calls: the test proves nothing")
	}

	sd.listsHang.Store(false)
	sd.startsHang.Store(false)
	sd.release()
	waitFor(t, "the pin of 1", func() bool {
		v := p.View()
		return sd.count("active") == 1 && v.Workers.Live == 1 && v.Workers.Starting == 0
	})
	sd.mu.Lock()
	defer sd.mu.Unlock()
	seen := map[string]bool{}
	for _, u := range sd.starts {
		if seen[u] {
			t.Errorf("%s started twice: %v", u, sd.starts)
		}
		seen[u] = true
	}
}
