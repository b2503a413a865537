// Package daemon is `flexiq-scaled run`: the Type=notify service that loads
// the configuration, adopts running workers, runs one controller per pool,
// and speaks sd_notify (READY, RELOADING, STOPPING, STATUS, WATCHDOG).
package daemon

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Options are the command line of `flexiq-scaled run`.
type Options struct {
	ConfigPath string
	User       bool // the user's service manager instead of the system's
}

// stallGrace is how far beyond its poll interval a pool's tick may lag
// before the watchdog stops being fed: a tick is bounded by the source
// timeout and a few D-Bus timeouts, so only a truly wedged loop gets here.
const stallGrace = 90 * time.Second

type runningPool struct {
	pool   *controller.Pool
	cancel context.CancelFunc
	done   chan struct{}
}

type daemon struct {
	opts  Options
	log   *eventlog.Logger
	units *units.Manager

	mu       sync.Mutex
	cfg      *config.Config
	pools    map[string]*runningPool
	stopping bool
	// Drains of pools that are no longer configured, run in the background.
	orphans sync.WaitGroup
}

// Run runs the daemon until SIGTERM or SIGINT and returns the exit code.
func Run(ctx context.Context, o Options) int {
	if o.ConfigPath == "" {
		o.ConfigPath = config.DefaultPath
	}
	// Signals are caught before anything else, so that a stop during
	// startup is a stop and not a kill.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	log := eventlog.New(os.Stderr)
	cfg, err := loadConfig(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flexiq-scaled: invalid configuration:\n%v\n", err)
		return 1
	}
	for _, w := range config.Warnings(cfg) {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "warning: %s", w)
	}

	mgr, err := connect(ctx, o, log, sigs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flexiq-scaled: %v\n", err)
		return 1
	}
	defer mgr.Close()
	d := &daemon{opts: o, log: log, units: mgr, cfg: cfg, pools: map[string]*runningPool{}}

	if err := d.start(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "flexiq-scaled: %v\n", err)
		return 1
	}
	notify("READY=1\nSTATUS=" + d.status())
	log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "flexiq-scaled ready: %s", d.status())

	wdCtx, stopWatchdog := context.WithCancel(ctx)
	defer stopWatchdog()
	go d.watchdog(wdCtx)

	for s := range sigs {
		switch s {
		case syscall.SIGHUP:
			d.reload(ctx)
		default:
			return d.shutdown(ctx, s)
		}
	}
	return 0
}

// loadConfig reads and fully checks a configuration: syntax, values, the
// file's safety, and that the workers' users exist.
func loadConfig(o Options) (*config.Config, error) {
	if err := config.CheckFileSafety(o.ConfigPath); err != nil {
		return nil, err
	}
	cfg, err := config.Load(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	if o.User {
		cfg.ForUserManager()
	}
	if problems := config.CheckUsers(cfg); len(problems) > 0 {
		return nil, &config.Error{Problems: problems}
	}
	return cfg, nil
}

// connect reaches the service manager, retrying with backoff: at boot the
// bus may come up after us. A stop signal meanwhile gives up.
func connect(ctx context.Context, o Options, log *eventlog.Logger, sigs <-chan os.Signal) (*units.Manager, error) {
	delay := 100 * time.Millisecond
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
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
			if s != syscall.SIGHUP {
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
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
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
	p, err := controller.NewPool(pc, d.units, d.log, controller.Options{})
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

// drainOrphans stops the workers of a pool that is not (or no longer)
// configured, in the background.
func (d *daemon) drainOrphans(ctx context.Context, pool string, ws []units.Worker) {
	for _, w := range ws {
		if w.ActiveState != "active" && w.ActiveState != "activating" {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
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

// reload re-reads the configuration on SIGHUP. An invalid file changes
// nothing: the daemon keeps running on the configuration it has.
func (d *daemon) reload(ctx context.Context) {
	notify(fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", monotonicUsec()))
	defer func() { notify("READY=1\nSTATUS=" + d.status()) }()

	cfg, err := loadConfig(d.opts)
	if err != nil {
		d.log.Event(eventlog.ConfigReloaded, eventlog.Err, eventlog.Fields{"FLEXIQ_ERROR": err.Error()},
			"reload rejected, keeping the running configuration:\n%v", err)
		return
	}
	d.mu.Lock()
	old := d.pools
	d.pools = map[string]*runningPool{}
	d.cfg = cfg
	d.mu.Unlock()

	var added, removed, updated []string
	for name, pc := range cfg.Pools {
		if rp, ok := old[name]; ok {
			if err := rp.pool.Update(pc); err != nil {
				d.log.Event(eventlog.ConfigReloaded, eventlog.Err, eventlog.Fields{"FLEXIQ_POOL": name}, "pool=%s: %v", name, err)
			}
			d.setPool(name, rp)
			updated = append(updated, name)
			continue
		}
		rp, err := d.newPool(pc)
		if err != nil {
			d.log.Event(eventlog.ConfigReloaded, eventlog.Err, eventlog.Fields{"FLEXIQ_POOL": name}, "pool=%s: %v", name, err)
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		existing, _ := d.units.ListWorkers(lctx, name)
		cancel()
		rp.pool.Start(ctx, existing)
		d.setPool(name, rp)
		d.run(ctx, rp)
		added = append(added, name)
	}
	for name, rp := range old {
		if _, ok := cfg.Pools[name]; ok {
			continue
		}
		removed = append(removed, name)
		rp.cancel()
		d.orphans.Add(1)
		go func() {
			defer d.orphans.Done()
			<-rp.done
			rp.pool.Drain(ctx, "pool removed from the configuration")
			rp.pool.Close()
		}()
	}
	slices.Sort(added)
	slices.Sort(removed)
	slices.Sort(updated)
	d.log.Event(eventlog.ConfigReloaded, eventlog.Notice, nil, "configuration reloaded from %s: added %v, removed %v, updated %v",
		d.opts.ConfigPath, added, removed, updated)
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
	d.log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "all workers drained; exiting")
	return 0
}

// watchdog feeds systemd's watchdog only while every pool keeps ticking, so
// that a wedged loop (a hung D-Bus call, a deadlock) gets the daemon
// restarted; the next one adopts the workers. It also keeps STATUS= current.
func (d *daemon) watchdog(ctx context.Context) {
	interval, _ := sddaemon.SdWatchdogEnabled(false)
	tick := 2 * time.Second
	if interval > 0 {
		tick = min(tick, interval/3)
	}
	lastStatus := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(tick):
		}
		var state []string
		if st := d.status(); st != lastStatus {
			state = append(state, "STATUS="+st)
			lastStatus = st
		}
		if interval > 0 {
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
		if now.Sub(rp.pool.LastProgress()) > rp.pool.PollInterval()+stallGrace {
			return rp.pool.Name()
		}
	}
	return ""
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
