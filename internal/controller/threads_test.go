package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// threadsSource is a fake flexiq source that also reports its live workers'
// threads.
type threadsSource struct {
	fakeSource
	n     int
	found bool
	err   error
}

func (s *threadsSource) Threads(ctx context.Context, now time.Time) (int, bool, error) {
	return s.n, s.found, s.err
}

// threads_per_worker = "auto": the busy signal uses what flexiq's live
// workers report, the fallback when none is live or the read fails, and
// every change is logged once.
func TestThreadsAuto(t *testing.T) {
	cfg := testPool("work")
	cfg.ThreadsAuto, cfg.ThreadsPerWorker, cfg.TargetUtilisation = true, 4, 1
	cfg.ScaleDownWindow = 0
	src := &threadsSource{n: 1, found: true}
	r := newRig(t, cfg)
	r.sd.stopNow = true // drained workers go at once: their jobs leave the count
	r.pool.opts.NewSource = func(config.Source) (source.Source, error) { return src, nil }
	r.pool.src = src
	r.start(r.pool)
	src.set(0, 3, nil) // three jobs running

	cases := []struct {
		name  string
		set   func()
		want  int // workers the busy signal asks for
		lines int // "threads per worker" lines logged so far
	}{
		{"one thread each, from the live workers", func() {}, 3, 1},
		{"unchanged: not logged again", func() {}, 3, 1},
		{"no live worker: the fallback", func() { src.found = false }, 1, 2},
		{"read error: the fallback, logged once", func() { src.found, src.err = true, errors.New("connection refused") }, 1, 3},
		{"back", func() { src.err = nil }, 3, 4},
	}
	for _, tc := range cases {
		tc.set()
		d := r.pool.Tick(context.Background())
		r.clock.advance(time.Second)
		if d.Busy != tc.want {
			t.Errorf("%s: busy = %d, want %d (%s)", tc.name, d.Busy, tc.want, d.Rationale)
		}
		if got := len(r.lines("threads per worker")); got != tc.lines {
			t.Errorf("%s: %d 'threads per worker' lines, want %d\n%s", tc.name, got, tc.lines, r.log)
		}
	}
	if got := len(r.lines("cannot read its workers' threads")); got != 1 {
		t.Errorf("%d read-error lines, want 1", got)
	}
}
