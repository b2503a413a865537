// Package daemon is `flexiq-scaled run`: the Type=notify service that loads
// the configuration, adopts running workers, runs one controller per pool,
// and speaks sd_notify (READY, RELOADING, STOPPING, STATUS, WATCHDOG).
//
// The files, by concern:
//   - daemon.go: the daemon's types and Run, its start-up in order
//     (signals, directories, configuration, the service manager);
//   - service.go: the service's duties towards systemd: the signal loop,
//     sd_notify, STATUS=, the watchdog and its judgement of stalled pools,
//     and the unit the daemon runs in;
//   - supervise.go: the pools' lifecycle: start and adoption of running
//     workers, the pools' loops, reload, removal, roll, and the drain and
//     reset of workers of pools no longer configured;
//   - stop.go: the stop: shutdown (a drain, or a restart that leaves the
//     workers to the next daemon) and the final sweep;
//   - api.go: the daemon's side of the control socket (reload among its
//     requests) and the daemon's directories;
//   - metrics.go: the /metrics endpoint;
//   - capacity.go: max_workers capped at what fits on the host.
package daemon

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/capacity"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/hostcheck"
	"github.com/flexiq/flexiq-scaled/internal/metrics"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Options are the command line of `flexiq-scaled run`.
type Options struct {
	ConfigPath string
	User       bool // the user's service manager instead of the system's
	// RuntimeDir holds the pools' state files and the control and
	// metrics sockets; RuntimeDir(User) if empty.
	RuntimeDir string
	// StateDir holds the operator's pauses and pins; StateDir(User) if
	// empty.
	StateDir string
}

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

	// reloads carries the control socket's reload requests to the
	// signal loop, the one place that reloads; loopDone closes when that
	// loop has ended, so that no request waits for it any longer.
	reloads  chan reloadAsk
	loopDone chan struct{}
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
	// warmers keep the wake processes of pools at zero running (warm.go).
	warmers *warmers
}

// Run runs the daemon until SIGTERM or SIGINT and returns the exit code.
func Run(ctx context.Context, o Options) int {
	if o.ConfigPath == "" {
		o.ConfigPath = config.DefaultPath
	}
	// Signals are caught before anything else, so that a stop during
	// startup is a stop and not a kill.
	// Roomy, so that signals arriving during a slow start or reload are
	// not dropped.
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// SIGUSR1 asked a daemon before issue 18 for a roll; its default
	// action would kill this one, workers' drain and all.
	signal.Ignore(syscall.SIGUSR1)

	log := eventlog.New(os.Stderr)
	o = prepareDirs(o, log)
	removeOldProtocol(o.RuntimeDir)

	cfg, warnings, err := loadConfig(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flexiq-scaled: invalid configuration:\n%v\n", err)
		return 1
	}
	for _, w := range warnings {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "warning: %s", w)
	}
	ledger := capacity.NewLedger(applyCapacity(log, cfg))

	mgr, hup, err := connect(ctx, o, log, sigs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flexiq-scaled: %v\n", err)
		return 1
	}
	defer mgr.Close()
	met := startMetrics(ctx, o, log, mgr)
	d := &daemon{
		opts: o, log: log, units: mgr, cfg: cfg, ledger: ledger, metrics: met,
		pools: map[string]*runningPool{}, removed: map[string]*removal{},
		statusKick: make(chan struct{}, 1),
		reloads:    make(chan reloadAsk), loopDone: make(chan struct{}),
		guard: controller.NewHostGuard(cfg.HostGuard, log, nil),
	}
	d.warmers = &warmers{pool: d.pool, units: mgr, log: log}

	if err := d.start(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "flexiq-scaled: %v\n", err)
		return 1
	}
	d.syncWake(ctx, cfg)
	apiCtx, stopAPI := context.WithCancel(ctx)
	defer stopAPI()
	d.serveControl(apiCtx)
	notify("READY=1\nSTATUS=" + d.status())
	log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "flexiq-scaled ready: %s", d.status())

	stopWatchdog := d.startWatchdog(ctx)
	defer stopWatchdog()

	return d.serveSignals(ctx, sigs, hup)
}

// prepareDirs fills in the default runtime and state directories and
// creates them if need be.
func prepareDirs(o Options, log *eventlog.Logger) Options {
	if o.RuntimeDir == "" {
		o.RuntimeDir = RuntimeDir(o.User)
	}
	// systemd creates it (RuntimeDirectory=); by hand, or with --user,
	// the daemon does. Without it the daemon still scales, but keeps no
	// state across restarts and has no control socket: worth a warning,
	// not a refusal to run.
	if err := os.MkdirAll(o.RuntimeDir, 0o755); err != nil {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "runtime directory: %v: no state across restarts, and no control socket", err)
	}
	if o.StateDir == "" {
		o.StateDir = StateDir(o.User)
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "state directory: %v: pauses and pins will not survive a restart", err)
	}
	return o
}

// removeOldProtocol removes what the file-and-signal protocol of daemons
// before issue 18 left in the runtime directory, which RuntimeDirectory-
// Preserve= keeps across restarts: its PID file, and requests and verdicts
// nobody will answer or collect. Nothing reads them: a roll asked of the
// old daemon is never replayed by this one.
func removeOldProtocol(dir string) {
	for _, pattern := range []string{"daemon.pid", "request.*", "verdict.*"} {
		old, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range old {
			os.Remove(f)
		}
	}
}

// loadConfig reads and fully checks a configuration: syntax, values, the
// file's safety, and the machine (users and groups through NSS, source paths
// the daemon's sandbox would hide). It returns the warnings to log, among
// them commands that systemd would not find, which may be deployed later.
func loadConfig(o Options) (*config.Config, []string, error) {
	if err := hostcheck.CheckConfigSafety(o.ConfigPath); err != nil {
		return nil, nil, err
	}
	cfg, err := config.Load(o.ConfigPath)
	if err != nil {
		return nil, nil, err
	}
	if o.User {
		cfg.ForUserManager()
	}
	problems, machine := hostcheck.CheckMachine(cfg)
	if len(problems) > 0 {
		return nil, nil, &config.Error{Problems: problems}
	}
	warnings := hostcheck.Warnings(cfg)
	for _, w := range machine {
		warnings = append(warnings, w.String())
	}
	return cfg, warnings, nil
}

// connect reaches the service manager, retrying with backoff: at boot the
// bus may come up after us. A stop signal meanwhile gives up; a SIGHUP is
// remembered (hup) for once the daemon has started.
func connect(ctx context.Context, o Options, log *eventlog.Logger, sigs <-chan os.Signal) (mgr *units.Manager, hup bool, err error) {
	delay := 100 * time.Millisecond
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, units.CallTimeout)
		mgr, err := units.Connect(cctx, units.Options{User: o.User})
		cancel()
		if err == nil {
			return mgr, hup, nil
		}
		if time.Now().After(deadline) {
			return nil, false, fmt.Errorf("connecting to the service manager: %w", err)
		}
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "cannot reach the service manager yet, retrying in %s: %v", delay, err)
		select {
		case s := <-sigs:
			// A reload now would find nothing to act on: it
			// happens once the daemon has started.
			if s != syscall.SIGHUP {
				return nil, false, fmt.Errorf("stopped by %s while connecting to the service manager", s)
			}
			hup = true
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}
