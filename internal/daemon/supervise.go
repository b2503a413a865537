package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// start adopts running workers, drains those of pools no longer configured,
// and brings every pool to min_workers.
func (d *daemon) start(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, units.ListTimeout)
	existing, err := d.units.ListWorkers(lctx, "")
	cancel()
	if err != nil {
		return fmt.Errorf("listing existing workers: %w", err)
	}
	byPool := map[string][]units.Worker{}
	for _, w := range existing {
		byPool[w.Pool] = append(byPool[w.Pool], w)
	}
	for name, ws := range byPool {
		if _, ok := d.cfg.Pools[name]; !ok {
			d.drainOrphans(ctx, name, ws)
		}
	}
	// Failed units of pools no longer configured would keep the host
	// "degraded" for ever: nothing else will ever look at them.
	d.resetUnconfigured(ctx, existing)
	var wg sync.WaitGroup
	for _, name := range slices.Sorted(maps.Keys(d.cfg.Pools)) {
		rp, err := d.newPool(d.cfg.Pools[name])
		if err != nil {
			return err
		}
		d.pools[name] = rp
		wg.Add(1)
		go func() {
			defer wg.Done()
			rp.pool.Start(ctx, byPool[name])
		}()
	}
	wg.Wait()
	for _, rp := range d.pools {
		d.run(ctx, rp)
	}
	return nil
}

func (d *daemon) newPool(pc *config.Pool) (*runningPool, error) {
	p, err := controller.NewPool(pc, d.units, d.log, controller.Options{
		StateDir:    d.opts.RuntimeDir,
		OnChange:    d.kickStatus,
		Guard:       d.guard,
		Ledger:      d.ledger,
		OverrideDir: d.opts.StateDir,
		OnTick:      d.metrics.Tick,
		// A command source runs its program as a transient unit of its
		// own, so that stopping it kills everything it started.
		NewSource: source.NewWithCommandRunner(d.units.CommandRunner(pc.Name)),
		// A service pool's probe commands and discovery after-change
		// commands run the same way (issue 19).
		Commands: d.units.CommandRunner(pc.Name).For(units.CommandHook),
		// Its command probes run as the pool's user (issue 27).
		ProbeCommands: func(user, group string) source.CommandRunner {
			return d.units.CommandRunner(pc.Name).For(units.CommandProbe).As(user, group)
		},
	})
	if err != nil {
		return nil, err
	}
	return &runningPool{pool: p, done: make(chan struct{})}, nil
}

// run starts a pool's tick loop in its own goroutine: a slow source in one
// pool stalls no other.
func (d *daemon) run(ctx context.Context, rp *runningPool) {
	pctx, cancel := context.WithCancel(ctx)
	rp.cancel = cancel
	go func() {
		defer close(rp.done)
		rp.pool.Run(pctx)
	}()
}

// resetUnconfigured resets the failed units among ws (all listed worker
// units) whose pool is not configured, so that systemd unloads them.
func (d *daemon) resetUnconfigured(ctx context.Context, ws []units.Worker) {
	d.mu.Lock()
	configured := d.cfg.Pools
	d.mu.Unlock()
	for _, w := range ws {
		if _, ok := configured[w.Pool]; ok || w.ActiveState != "failed" {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, units.CallTimeout)
		err := d.units.ResetFailed(rctx, w.Unit)
		cancel()
		if err != nil {
			d.log.Event(eventlog.Lifecycle, eventlog.Warning, eventlog.Fields{"FLEXIQ_POOL": w.Pool, "FLEXIQ_UNIT": w.Unit},
				"cannot reset failed %s of unconfigured pool %s: %v", w.Unit, w.Pool, err)
			continue
		}
		d.log.With("pool", w.Pool).Event(eventlog.Lifecycle, eventlog.Info, eventlog.Fields{"FLEXIQ_UNIT": w.Unit, "FLEXIQ_RESULT": w.Result},
			"is not configured: reset failed %s (result %s)", w.Unit, w.Result)
	}
}

// resetUnconfiguredNow lists every worker unit and resets the failed ones
// of unconfigured pools.
func (d *daemon) resetUnconfiguredNow(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, units.ListTimeout)
	ws, err := d.units.ListWorkers(lctx, "")
	cancel()
	if err != nil {
		d.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "cannot list workers to reset failed units: %v", err)
		return
	}
	d.resetUnconfigured(ctx, ws)
}

// drainOrphans stops the workers of a pool that is not (or no longer)
// configured, in the background.
func (d *daemon) drainOrphans(ctx context.Context, pool string, ws []units.Worker) {
	for _, w := range ws {
		if w.ActiveState != "active" && w.ActiveState != "activating" {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, units.CallTimeout)
		done, err := d.units.StopWorker(sctx, w.Unit)
		cancel()
		if err != nil {
			d.log.Event(eventlog.WorkerStopped, eventlog.Err, eventlog.Fields{"FLEXIQ_POOL": pool, "FLEXIQ_UNIT": w.Unit},
				"cannot drain %s of unconfigured pool %s: %v", w.Unit, pool, err)
			continue
		}
		d.log.With("pool", pool).Event(eventlog.WorkerStopped, eventlog.Info, eventlog.Fields{"FLEXIQ_UNIT": w.Unit},
			"is not configured: draining %s", w.Unit)
		d.orphans.Add(1)
		go func() {
			defer d.orphans.Done()
			controller.AwaitStop(ctx, d.units, w.Unit, done, time.Hour)
		}()
	}
}

// reload re-reads the configuration and answers asks, the reload requests
// taken before the file was read. An invalid file changes nothing: the
// daemon keeps running on the configuration it has, and each request gets
// the problems.
func (d *daemon) reload(ctx context.Context, asks []reloadAsk) {
	notify(fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", monotonicUsec()))
	defer func() { notify("READY=1\nSTATUS=" + d.status()) }()

	cfg, warnings, err := loadConfig(d.opts)
	if err != nil {
		d.log.Event(eventlog.ConfigReloaded, eventlog.Err, eventlog.Fields{"FLEXIQ_ERROR": err.Error()},
			"reload rejected, keeping the running configuration:\n%v", err)
		answerAll(asks, api.ReloadResponse{Problems: problemLines(err)})
		return
	}
	for _, w := range warnings {
		d.log.Event(eventlog.ConfigReloaded, eventlog.Warning, nil, "warning: %s", w)
	}
	d.ledger.SetBudget(applyCapacity(d.log, cfg))
	d.mu.Lock()
	old, oldCfg := d.pools, d.cfg
	d.pools = map[string]*runningPool{}
	d.cfg = cfg
	d.mu.Unlock()

	changes := d.reloadDaemonWide(oldCfg, cfg)
	poolChanges, problems, added := d.reloadPools(ctx, old, oldCfg, cfg)
	changes = append(changes, poolChanges...)
	d.answerReload(asks, changes, problems)

	// Bringing new pools to min_workers may take a while: the verdict is
	// out already.
	d.startAdded(ctx, added)
	d.resetUnconfiguredNow(ctx)
	d.syncWake(ctx, cfg)
}

// reloadDaemonWide applies the changes to the daemon-wide settings and
// names them.
func (d *daemon) reloadDaemonWide(oldCfg, cfg *config.Config) []string {
	var changes []string
	if keys := config.DiffDaemon(&oldCfg.Daemon, &cfg.Daemon); len(keys) > 0 {
		changes = append(changes, "daemon: "+strings.Join(keys, ", "))
	}
	if !reflect.DeepEqual(oldCfg.HostGuard, cfg.HostGuard) {
		changes = append(changes, "host_guard")
		d.guard.SetConfig(cfg.HostGuard)
	}
	return changes
}

// reloadPools updates the pools kept, creates the pools added (started
// later, by startAdded) and removes the pools gone. It returns the changes,
// the problems, and the pools added.
func (d *daemon) reloadPools(ctx context.Context, old map[string]*runningPool, oldCfg, cfg *config.Config) (changes, problems []string, added []*runningPool) {
	for _, name := range slices.Sorted(maps.Keys(cfg.Pools)) {
		pc := cfg.Pools[name]
		if rp, ok := old[name]; ok {
			if keys := config.Diff(oldCfg.Pools[name], pc); len(keys) > 0 {
				changes = append(changes, fmt.Sprintf("pool %s: %s", name, strings.Join(keys, ", ")))
				if err := rp.pool.Update(pc); err != nil {
					problems = append(problems, fmt.Sprintf("pool %s: %v", name, err))
					d.log.Event(eventlog.ConfigReloaded, eventlog.Err, eventlog.Fields{"FLEXIQ_POOL": name}, "pool=%s: %v", name, err)
				}
				// The watchdog judges the pool afresh from now on:
				// a shorter poll interval must not make the wait
				// for the old one look like a stall.
				d.mu.Lock()
				rp.reloadedAt = time.Now()
				d.mu.Unlock()
			}
			d.setPool(name, rp)
			continue
		}
		// Added back while its earlier instance still drains: end
		// that drain first, so that it never touches the new workers.
		d.endRemoval(name)
		rp, err := d.newPool(pc)
		if err != nil {
			problems = append(problems, fmt.Sprintf("pool %s: %v", name, err))
			d.log.Event(eventlog.ConfigReloaded, eventlog.Err, eventlog.Fields{"FLEXIQ_POOL": name}, "pool=%s: %v", name, err)
			continue
		}
		changes = append(changes, "pool "+name+": added")
		d.setPool(name, rp)
		added = append(added, rp)
	}
	for _, name := range slices.Sorted(maps.Keys(old)) {
		if _, ok := cfg.Pools[name]; ok {
			continue
		}
		changes = append(changes, "pool "+name+": removed, draining its workers")
		d.remove(ctx, name, old[name])
	}
	return changes, problems, added
}

// answerReload logs the reload's verdict and answers every request with it.
func (d *daemon) answerReload(asks []reloadAsk, changes, problems []string) {
	if len(changes) == 0 {
		changes = []string{"nothing changed"}
	}
	prio, verdict := eventlog.Notice, "reloaded"
	if len(problems) > 0 {
		prio, verdict = eventlog.Err, "partly reloaded"
	}
	d.log.Event(eventlog.ConfigReloaded, prio, eventlog.Fields{"FLEXIQ_CHANGES": strings.Join(changes, "; ")},
		"configuration %s from %s: %s", verdict, d.opts.ConfigPath, strings.Join(changes, "; "))
	answerAll(asks, api.ReloadResponse{OK: len(problems) == 0, Changes: changes, Problems: problems})
}

// startAdded brings the pools added by a reload to min_workers, adopting
// any running workers of theirs, and starts their loops.
func (d *daemon) startAdded(ctx context.Context, added []*runningPool) {
	for _, rp := range added {
		name := rp.pool.Name()
		lctx, cancel := context.WithTimeout(ctx, units.ListTimeout)
		existing, err := d.units.ListWorkers(lctx, name)
		cancel()
		if err != nil {
			d.log.Event(eventlog.ConfigReloaded, eventlog.Warning, eventlog.Fields{"FLEXIQ_POOL": name}, "pool=%s: cannot list its running workers: %v", name, err)
		}
		rp.pool.Start(ctx, existing)
		d.run(ctx, rp)
	}
}

// remove stops a removed pool's loop and drains its workers in the
// background. Its drain can be cut short by endRemoval, when the pool is
// added back: the stop jobs already queued run on in systemd, and the new
// pool sees those units as draining.
func (d *daemon) remove(ctx context.Context, name string, rp *runningPool) {
	rctx, cancel := context.WithCancel(ctx)
	r := &removal{cancel: cancel, done: make(chan struct{})}
	d.mu.Lock()
	d.removed[name] = r
	d.mu.Unlock()
	rp.cancel()
	d.orphans.Add(1)
	go func() {
		defer d.orphans.Done()
		defer close(r.done)
		defer cancel()
		<-rp.done
		rp.pool.Drain(rctx, "pool removed from the configuration")
		rp.pool.Close()
		if rctx.Err() == nil {
			d.ledger.Forget(name)
			d.metrics.Forget(name)
		}
		d.mu.Lock()
		if d.removed[name] == r {
			delete(d.removed, name)
		}
		d.mu.Unlock()
		if rctx.Err() == nil {
			d.resetUnconfiguredNow(ctx)
		}
	}()
}

// endRemoval ends the drain of an earlier instance of a pool that is being
// added back, and waits for it, so that the old instance's drain (which
// re-lists the pool's units) never stops a worker of the new one.
func (d *daemon) endRemoval(name string) {
	d.mu.Lock()
	r := d.removed[name]
	delete(d.removed, name)
	d.mu.Unlock()
	if r == nil {
		return
	}
	r.cancel()
	// Drain returns soon after its context ends (it then lists and stops
	// nothing more); the bound keeps a slow one from holding the reload.
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
	}
	d.log.With("pool", name).Event(eventlog.Lifecycle, eventlog.Info, nil,
		"added back while draining: its draining workers finish on their own")
}

// problemLines splits a configuration error into one line per problem.
func problemLines(err error) []string {
	var ce *config.Error
	if errors.As(err, &ce) {
		lines := make([]string, len(ce.Problems))
		for i, p := range ce.Problems {
			lines[i] = p.String()
		}
		return lines
	}
	return strings.Split(err.Error(), "\n")
}

func (d *daemon) setPool(name string, rp *runningPool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pools[name] = rp
}

func (d *daemon) snapshot() []*runningPool {
	d.mu.Lock()
	defer d.mu.Unlock()
	ps := make([]*runningPool, 0, len(d.pools))
	for _, name := range slices.Sorted(maps.Keys(d.pools)) {
		ps = append(ps, d.pools[name])
	}
	return ps
}
