package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	ctlsock "github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/internal/controller"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// warmers keep the wake processes of pools at zero running (issue 29): one
// goroutine per pool whose wake socket listens. Its zero value is not
// usable; the daemon makes one at its start.
type warmers struct {
	pool  func(name string) (*controller.Pool, error)
	units *units.Manager
	log   *eventlog.Logger

	mu    sync.Mutex
	stops map[string]context.CancelFunc
	done  bool // the daemon stops: no warmer starts again
}

// run runs one warmer per pool that syncWake found listening, and stops
// the others'. Each warmer is started afresh: a reload may have given the
// pool another loop, whose ready set it must follow.
func (w *warmers) run(ctx context.Context, listening []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopLocked()
	if w.done {
		return
	}
	for _, name := range listening {
		wctx, stop := context.WithCancel(ctx)
		w.stops[name] = stop
		go w.warm(wctx, name)
	}
}

// stop ends every warmer for good: the daemon stops its wake sockets.
func (w *warmers) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopLocked()
	w.done = true
}

func (w *warmers) stopLocked() {
	for _, stop := range w.stops {
		stop()
	}
	w.stops = map[string]context.CancelFunc{}
}

// warm keeps the pool's wake process running while the pool has no ready
// replica: traffic goes to the wake address then, and its first
// connection should find the process up, not wait some 80 ms for systemd
// to start it (issue 29's overhead). The process exits by itself once the
// pool is awake and it is idle (internal/wake's IdleExit), and the
// warmer starts it again when the last replica leaves the ready set. It
// follows the ready set as the wake process does, by the long poll; a
// start that fails is logged, and socket activation still serves.
func (w *warmers) warm(ctx context.Context, name string) {
	var after uint64
	for ctx.Err() == nil {
		p, err := w.pool(name)
		var r api.WakeReady
		if err == nil {
			r, err = p.ColdWake().Ready(ctx, after, ctlsock.MaxWakeWait)
		}
		if err != nil {
			// Not yet noted by the pool's loop, or gone with a reload
			// (which starts the warmers again).
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		if r.Generation == after {
			continue
		}
		after = r.Generation
		if len(r.Addrs) > 0 {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = w.units.StartWakeProcess(sctx, name)
		cancel()
		if err != nil && ctx.Err() == nil {
			w.log.Event(eventlog.Lifecycle, eventlog.Warning, eventlog.Fields{"FLEXIQ_POOL": name},
				"pool=%s: starting its wake process ahead of a connection: %v (a connection will start it)", name, err)
		}
	}
}
