// Package daemon is `flexiq-scaled run`: the Type=notify service that loads
// the configuration, adopts running workers, runs one controller per pool,
// and speaks sd_notify (READY, RELOADING, STOPPING, STATUS, WATCHDOG).
package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"

	"github.com/flexiq/flexiq-scaled/internal/capacity"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/metrics"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Options are the command line of `flexiq-scaled run`.
type Options struct {
	ConfigPath string
	User       bool // the user's service manager instead of the system's
	// RuntimeDir holds the pools' state files, the PID file and the
	// control requests and verdicts, and the control socket;
	// RuntimeDir(User) if empty.
	RuntimeDir string
	// StateDir holds the operator's pauses and pins; StateDir(User) if
	// empty.
	StateDir string
}

// stallGrace is how far beyond its poll interval a pool's tick may lag
// before the watchdog stops being fed: a tick is bounded by the source
// timeout and a few D-Bus timeouts, so only a truly wedged loop gets here.
const stallGrace = 90 * time.Second

type runningPool struct {
	pool   *controller.Pool
	cancel context.CancelFunc
	done   chan struct{}
	// reloadedAt is when a reload last changed the pool's configuration
	// (zero if never): the watchdog judges the pool's progress from then
	// on, against the new poll interval (see stalled).
	reloadedAt time.Time
}

// removal is the drain of a pool removed from the configuration.
type removal struct {
	cancel context.CancelFunc
	done   chan struct{}
}

type daemon struct {
	opts  Options
	log   *eventlog.Logger
	units *units.Manager

	ctl *control
	// guard is the host guard, shared by every pool (issue 9).
	guard *controller.HostGuard
	// ledger is the host's worker budget, shared by the pools.
	ledger *capacity.Ledger
	// metrics serves /metrics (metrics.go).
	metrics *metrics.Metrics

	mu       sync.Mutex
	cfg      *config.Config
	pools    map[string]*runningPool
	stopping bool
	// Drains of pools that are no longer configured, run in the background.
	orphans sync.WaitGroup
	// Drains of pools removed by a reload, by name, until they end; a
	// pool added back meanwhile ends its old drain first (see reload).
	removed map[string]*removal

	// statusKick asks the watchdog goroutine to push STATUS= now. Pools
	// kick it after every tick that changed their status; it holds one
	// kick, so a burst of changes costs one update, and a kick never
	// blocks a pool.
	statusKick chan struct{}
}

// Run runs the daemon until SIGTERM or SIGINT and returns the exit code.
func Run(ctx context.Context, o Options) int {
	if o.ConfigPath == "" {
		o.ConfigPath = config.DefaultPath
	}
	// Signals are caught before anything else, so that a stop during
	// startup is a stop and not a kill.
	// SIGUSR1 asks for a roll (see control.go). Roomy, so that signals
	// arriving during a slow start or reload are not dropped; a dropped
	// one would lose no request anyway, as every pass reads them all.
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1)

	log := eventlog.New(os.Stderr)
	if o.RuntimeDir == "" {
		o.RuntimeDir = RuntimeDir(o.User)
	}
	// systemd creates it (RuntimeDirectory=); by hand, or with --user,
	// the daemon does. Without it the daemon still scales, but keeps no
	// state across restarts and cannot answer reload and roll requests:
	// worth a warning, not a refusal to run.
	if err := os.MkdirAll(o.RuntimeDir, 0o755); err != nil {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "runtime directory: %v: no state across restarts, and no answers to flexiq-scaled reload or roll", err)
	}
	if o.StateDir == "" {
		o.StateDir = StateDir(o.User)
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "state directory: %v: pauses and pins will not survive a restart", err)
	}
	ctl := &control{dir: o.RuntimeDir, now: time.Now, logf: func(format string, args ...any) {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, format, args...)
	}}
	// Written before anything slow, so that `flexiq-scaled roll` during a
	// long start finds a daemon that handles SIGUSR1; the request waits.
	pidFile := filepath.Join(o.RuntimeDir, PIDFile)
	if err := writeAtomic(o.RuntimeDir, PIDFile, []byte(strconv.Itoa(os.Getpid())+"\n")); err != nil {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "%v: flexiq-scaled roll and reload need --pid", err)
	}
	defer removePIDFile(pidFile)

	cfg, warnings, err := loadConfig(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flexiq-scaled: invalid configuration:\n%v\n", err)
		return 1
	}
	for _, w := range warnings {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "warning: %s", w)
	}
	ledger := capacity.NewLedger(applyCapacity(log, cfg))

	mgr, err := connect(ctx, o, log, sigs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flexiq-scaled: %v\n", err)
		return 1
	}
	defer mgr.Close()
	met := startMetrics(ctx, o, log, mgr)
	d := &daemon{
		opts: o, log: log, units: mgr, ctl: ctl, cfg: cfg, ledger: ledger, metrics: met,
		pools: map[string]*runningPool{}, removed: map[string]*removal{},
		statusKick: make(chan struct{}, 1),
		guard:      controller.NewHostGuard(cfg.HostGuard, log, nil),
	}

	if err := d.start(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "flexiq-scaled: %v\n", err)
		return 1
	}
	apiCtx, stopAPI := context.WithCancel(ctx)
	defer stopAPI()
	d.serveControl(apiCtx)
	notify("READY=1\nSTATUS=" + d.status())
	log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "flexiq-scaled ready: %s", d.status())

	wdCtx, stopWatchdog := context.WithCancel(ctx)
	defer stopWatchdog()
	wdInterval, _ := sddaemon.SdWatchdogEnabled(false)
	wdTick := 2 * time.Second
	if wdInterval > 0 {
		wdTick = min(wdTick, wdInterval/3)
	}
	go d.watchdog(wdCtx, wdInterval, wdTick)

	// Requests made while the daemon was starting: their signal may have
	// been swallowed by connect.
	if reqs := ctl.pending(OpReload); len(reqs) > 0 {
		d.reload(ctx, reqs)
	}
	d.roll(ctl.pending(OpRoll))

	for s := range sigs {
		switch s {
		case syscall.SIGHUP:
			// Read the requests before the file: each is answered by
			// a reload that read the file after it was made.
			d.reload(ctx, ctl.pending(OpReload))
		case syscall.SIGUSR1:
			d.roll(ctl.pending(OpRoll))
		default:
			return d.shutdown(ctx, s)
		}
	}
	return 0
}

// removePIDFile removes the PID file if it is still ours: a restarted
// daemon may already have written its own.
func removePIDFile(path string) {
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
		os.Remove(path)
	}
}

// loadConfig reads and fully checks a configuration: syntax, values, the
// file's safety, and the machine (users and groups through NSS, source paths
// the daemon's sandbox would hide). It returns the warnings to log, among
// them commands that systemd would not find, which may be deployed later.
func loadConfig(o Options) (*config.Config, []string, error) {
	if err := config.CheckConfigSafety(o.ConfigPath); err != nil {
		return nil, nil, err
	}
	cfg, err := config.Load(o.ConfigPath)
	if err != nil {
		return nil, nil, err
	}
	if o.User {
		cfg.ForUserManager()
	}
	problems, machine := config.CheckMachine(cfg)
	if len(problems) > 0 {
		return nil, nil, &config.Error{Problems: problems}
	}
	warnings := config.Warnings(cfg)
	for _, w := range machine {
		warnings = append(warnings, w.String())
	}
	return cfg, warnings, nil
}

// connect reaches the service manager, retrying with backoff: at boot the
// bus may come up after us. A stop signal meanwhile gives up.
func connect(ctx context.Context, o Options, log *eventlog.Logger, sigs <-chan os.Signal) (*units.Manager, error) {
	delay := 100 * time.Millisecond
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, units.CallTimeout)
		mgr, err := units.Connect(cctx, units.Options{User: o.User})
		cancel()
		if err == nil {
			return mgr, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("connecting to the service manager: %w", err)
		}
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "cannot reach the service manager yet, retrying in %s: %v", delay, err)
		select {
		case s := <-sigs:
			// A reload or roll now would find nothing to act on;
			// their requests wait for the end of the start.
			if s != syscall.SIGHUP && s != syscall.SIGUSR1 {
				return nil, fmt.Errorf("stopped by %s while connecting to the service manager", s)
			}
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

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

// kickStatus asks for STATUS= to be pushed now; it never blocks.
func (d *daemon) kickStatus() {
	select {
	case d.statusKick <- struct{}{}:
	default: // one is already pending; it will read the latest status
	}
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
		d.log.Event(eventlog.Lifecycle, eventlog.Info, eventlog.Fields{"FLEXIQ_POOL": w.Pool, "FLEXIQ_UNIT": w.Unit, "FLEXIQ_RESULT": w.Result},
			"pool=%s is not configured: reset failed %s (result %s)", w.Pool, w.Unit, w.Result)
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
		d.log.Event(eventlog.WorkerStopped, eventlog.Info, eventlog.Fields{"FLEXIQ_POOL": pool, "FLEXIQ_UNIT": w.Unit},
			"pool=%s is not configured: draining %s", pool, w.Unit)
		d.orphans.Add(1)
		go func() {
			defer d.orphans.Done()
			controller.AwaitStop(ctx, d.units, w.Unit, done, time.Hour)
		}()
	}
}

// reload re-reads the configuration on SIGHUP and answers reqs, the
// reload requests read before the file. An invalid file changes nothing:
// the daemon keeps running on the configuration it has, and each request
// gets the problems.
func (d *daemon) reload(ctx context.Context, reqs []Request) {
	notify(fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", monotonicUsec()))
	defer func() { notify("READY=1\nSTATUS=" + d.status()) }()

	cfg, warnings, err := loadConfig(d.opts)
	if err != nil {
		d.log.Event(eventlog.ConfigReloaded, eventlog.Err, eventlog.Fields{"FLEXIQ_ERROR": err.Error()},
			"reload rejected, keeping the running configuration:\n%v", err)
		for _, r := range reqs {
			d.ctl.answer(r, Verdict{Problems: problemLines(err)})
		}
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

	var changes, problems []string
	if keys := config.DiffDaemon(&oldCfg.Daemon, &cfg.Daemon); len(keys) > 0 {
		changes = append(changes, "daemon: "+strings.Join(keys, ", "))
	}
	if !reflect.DeepEqual(oldCfg.HostGuard, cfg.HostGuard) {
		changes = append(changes, "host_guard")
		d.guard.SetConfig(cfg.HostGuard)
	}
	var added []*runningPool
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
	if len(changes) == 0 {
		changes = []string{"nothing changed"}
	}
	prio, verdict := eventlog.Notice, "reloaded"
	if len(problems) > 0 {
		prio, verdict = eventlog.Err, "partly reloaded"
	}
	d.log.Event(eventlog.ConfigReloaded, prio, eventlog.Fields{"FLEXIQ_CHANGES": strings.Join(changes, "; ")},
		"configuration %s from %s: %s", verdict, d.opts.ConfigPath, strings.Join(changes, "; "))
	for _, r := range reqs {
		d.ctl.answer(r, Verdict{OK: len(problems) == 0, Changes: changes, Problems: problems})
	}

	// Bringing new pools to min_workers may take a while: the verdict is
	// out already.
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
	d.resetUnconfiguredNow(ctx)
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
	d.log.Event(eventlog.Lifecycle, eventlog.Info, eventlog.Fields{"FLEXIQ_POOL": name},
		"pool=%s added back while draining: its draining workers finish on their own", name)
}

// roll asks each requested pool for a rolling replacement of its workers
// and answers every request. A request naming a pool that is not
// configured rolls nothing.
func (d *daemon) roll(reqs []Request) {
	for _, r := range reqs {
		d.mu.Lock()
		var ps []*controller.Pool
		var unknown []string
		for _, name := range r.Pools {
			if rp, ok := d.pools[name]; ok {
				ps = append(ps, rp.pool)
			} else {
				unknown = append(unknown, name)
			}
		}
		d.mu.Unlock()
		switch {
		case len(r.Pools) == 0:
			d.ctl.answer(r, Verdict{Problems: []string{"no pool named"}})
			continue
		case len(unknown) > 0:
			d.ctl.answer(r, Verdict{Problems: []string{"no such pool: " + strings.Join(unknown, ", ")}})
			d.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "roll refused: no such pool: %s", strings.Join(unknown, ", "))
			continue
		}
		reason := r.Reason
		if reason == "" {
			reason = "flexiq-scaled roll"
		}
		var changes []string
		for _, p := range ps {
			p.Roll(reason)
			changes = append(changes, "pool "+p.Name()+": rollout requested")
		}
		d.ctl.answer(r, Verdict{OK: true, Changes: changes})
	}
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
			}
			d.log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "%s is restarting: leaving %d workers running for the next daemon to adopt", unit, n)
			return 0
		}
	}
	d.log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "stopping on %s: draining every worker", s)
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
				d.log.Event(eventlog.WorkerStopped, eventlog.Warning, eventlog.Fields{"FLEXIQ_POOL": w.Pool, "FLEXIQ_SLOT": strconv.Itoa(w.Slot), "FLEXIQ_UNIT": w.Unit},
					"pool=%s %s was still %s after the pools drained: stopping it", w.Pool, w.Unit, w.ActiveState)
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

// watchdog feeds systemd's watchdog only while every pool keeps ticking, so
// that a wedged loop (a hung D-Bus call, a deadlock) gets the daemon
// restarted; the next one adopts the workers. It also keeps STATUS= current.
//
// interval is the watchdog's (0: none); tick is how often it is fed, and
// STATUS= refreshed even without a kick.
func (d *daemon) watchdog(ctx context.Context, interval, tick time.Duration) {
	lastStatus := ""
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		feed := false
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			feed = true
		case <-d.statusKick:
			// A pool's status changed: push it now, not at the
			// next tick of the watchdog.
		}
		var state []string
		if st := d.status(); st != lastStatus {
			state = append(state, "STATUS="+st)
			lastStatus = st
		}
		if feed && interval > 0 {
			if stalled := d.stalled(time.Now()); stalled == "" {
				state = append(state, "WATCHDOG=1")
			} else {
				d.log.Event(eventlog.Lifecycle, eventlog.Err, nil, "pool %s has made no progress: not feeding the watchdog", stalled)
			}
		}
		if len(state) > 0 {
			notify(strings.Join(state, "\n"))
		}
	}
}

// stalled names a pool whose loop has not completed a tick for too long.
func (d *daemon) stalled(now time.Time) string {
	d.mu.Lock()
	stopping := d.stopping
	d.mu.Unlock()
	if stopping {
		return ""
	}
	for _, rp := range d.snapshot() {
		d.mu.Lock()
		reloadedAt := rp.reloadedAt
		d.mu.Unlock()
		if isStalled(now, rp.pool.LastProgress(), reloadedAt, rp.pool.PollInterval()) {
			return rp.pool.Name()
		}
	}
	return ""
}

// isStalled judges a pool's loop: stalled when neither a tick nor a reload
// of its configuration happened within its poll interval plus stallGrace.
// A reload counts because the loop may have been sleeping out an old, longer
// interval: the new one is judged from the reload on (and the controller's
// Update wakes the loop at once).
func isStalled(now, lastProgress, reloadedAt time.Time, poll time.Duration) bool {
	since := lastProgress
	if reloadedAt.After(since) {
		since = reloadedAt
	}
	return now.Sub(since) > poll+stallGrace
}

// status is the one-line summary for `systemctl status`.
func (d *daemon) status() string {
	pools := d.snapshot()
	if len(pools) == 0 {
		return "no pools configured"
	}
	parts := make([]string, 0, len(pools))
	for _, rp := range pools {
		parts = append(parts, rp.pool.Status().String())
	}
	return strings.Join(parts, "; ")
}

func notify(state string) {
	// Outside systemd there is no socket, and nothing to tell.
	_, _ = sddaemon.SdNotify(false, state)
}

func monotonicUsec() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano() / 1000
}

// ownUnit is the service unit this process runs in, from its cgroup path
// (e.g. /system.slice/flexiq-scaled.service), or "" outside a service.
func ownUnit() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	return unitFromCgroup(string(b))
}

func unitFromCgroup(procCgroup string) string {
	for _, line := range strings.Split(procCgroup, "\n") {
		// cgroup2 ("0::/...") or the v1 systemd hierarchy ("1:name=systemd:/...").
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || (parts[1] != "" && parts[1] != "name=systemd") {
			continue
		}
		path := parts[2]
		base := path[strings.LastIndex(path, "/")+1:]
		if strings.HasSuffix(base, ".service") {
			return base
		}
	}
	return ""
}
