package daemon

import (
	"context"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// shutdown handles SIGTERM/SIGINT. A stop drains every worker of every pool
// in parallel and waits for them. A restart (systemctl restart, a package
// upgrade) leaves the workers running for the next daemon to adopt.
func (d *daemon) shutdown(ctx context.Context, s os.Signal) int {
	notify("STOPPING=1")
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	pools := d.snapshot()
	for _, rp := range pools {
		rp.cancel()
	}
	for _, rp := range pools {
		<-rp.done
	}
	if unit := ownUnit(); unit != "" {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		restart, err := d.units.QueuedJob(qctx, unit, "restart")
		cancel()
		if err != nil {
			d.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "cannot tell a restart from a stop (%v): draining", err)
		}
		if restart {
			n := 0
			for _, rp := range pools {
				n += rp.pool.Status().Current
				// A fleet's leader hands its lease over now, not after
				// its TTL; its workers stay.
				rp.pool.Resign()
			}
			d.log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "%s is restarting: leaving %d workers running for the next daemon to adopt", unit, n)
			return 0
		}
	}
	d.log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "stopping on %s: draining every worker", s)
	d.stopWake(ctx)
	var wg sync.WaitGroup
	for _, rp := range pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rp.pool.Drain(ctx, "daemon stopping")
			rp.pool.Close()
		}()
	}
	wg.Wait()
	d.orphans.Wait()
	d.sweep(ctx)
	return 0
}

// sweepLimit bounds the final sweep of a stop. systemd's TimeoutStopSec
// (15 min in the shipped unit) bounds the whole stop anyway.
const sweepLimit = 10 * time.Minute

// sweep is the last step of a stop: it re-lists every worker unit of every
// pool, configured or not, and stops whatever still runs, until nothing
// does. The pools drained the workers they knew, but a worker whose start
// job was still pending when its pool stopped, or that was started during
// the shutdown, is known to none. The listing goes over the same bus
// connection as every earlier start call, so systemd has processed those
// calls before it answers.
func (d *daemon) sweep(ctx context.Context) {
	deadline := time.Now().Add(sweepLimit)
	for {
		lctx, cancel := context.WithTimeout(ctx, units.ListTimeout)
		ws, err := d.units.ListWorkers(lctx, "")
		cancel()
		if err != nil {
			if time.Now().After(deadline) {
				d.log.Event(eventlog.Lifecycle, eventlog.Err, nil, "cannot list workers to make sure none is left running: %v; exiting", err)
				return
			}
			d.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "cannot list workers to make sure none is left running, retrying: %v", err)
			time.Sleep(time.Second)
			continue
		}
		var stopping sync.WaitGroup
		left := 0
		d.mu.Lock()
		cfg := d.cfg
		d.mu.Unlock()
		for _, w := range ws {
			if pc, ok := cfg.Pools[w.Pool]; ok && pc.Mode == config.ModeDryRun {
				continue // a dry-run pool's units were never the daemon's
			}
			switch w.ActiveState {
			case "inactive":
			case "failed":
				// Nothing runs, but a failed unit keeps the host
				// "degraded" after the stop.
				rctx, cancel := context.WithTimeout(ctx, units.CallTimeout)
				_ = d.units.ResetFailed(rctx, w.Unit)
				cancel()
			case "deactivating":
				left++ // already stopping: wait for it below
			default: // active, activating, reloading
				left++
				sctx, cancel := context.WithTimeout(ctx, units.CallTimeout)
				done, err := d.units.StopWorker(sctx, w.Unit)
				cancel()
				if err != nil {
					d.log.Event(eventlog.WorkerStopped, eventlog.Err, eventlog.Fields{"FLEXIQ_POOL": w.Pool, "FLEXIQ_UNIT": w.Unit},
						"cannot stop %s, still %s after the pools drained: %v", w.Unit, w.ActiveState, err)
					continue
				}
				d.log.With("pool", w.Pool).Event(eventlog.WorkerStopped, eventlog.Warning, eventlog.Fields{"FLEXIQ_SLOT": strconv.Itoa(w.Slot), "FLEXIQ_UNIT": w.Unit},
					"%s was still %s after the pools drained: stopping it", w.Unit, w.ActiveState)
				stopping.Add(1)
				go func() {
					defer stopping.Done()
					controller.AwaitStop(ctx, d.units, w.Unit, done, max(time.Until(deadline), time.Second))
				}()
			}
		}
		if left == 0 {
			d.log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "all workers drained; exiting")
			return
		}
		if time.Now().After(deadline) {
			d.log.Event(eventlog.Lifecycle, eventlog.Err, nil, "%d workers still running after %s; exiting anyway", left, sweepLimit)
			return
		}
		stopping.Wait()
		// Units stopped by someone else give us no job to await.
		time.Sleep(250 * time.Millisecond)
	}
}
