// Package controller runs one pool: at each tick it lists the pool's units,
// reads the queue and the workers' CPU, asks the policy for a decision, and
// starts or drains worker units to follow it. The decision itself lives in
// package policy and the D-Bus calls behind the Units interface (package
// units); what the pool knows of its units is in fleet, which does no I/O.
//
// A pool's state has one owner: its loop (Run). The operator's operations
// (reload, roll, pause, pin, unpin, resume) arrive as messages that the loop
// applies between ticks; when no loop runs (at Start, in Drain, in tests
// that drive Tick themselves) the caller owns the state for the length of
// its call instead (loop.go). The source's reads, which may hang for as
// long as the poll interval, and the calls to systemd (listings, starts,
// stops: the acting jobs of package acting), which may hang while PID 1 does, run
// off the loop on values handed to them, so that nothing an operator does
// waits for them. Readers (status, explain,
// the metrics, STATUS=, the watchdog) read an immutable snapshot that the
// owner publishes after each tick and each message (package snapshot): no lock is
// held across a D-Bus call or a source read.
//
// The decision and the workers are apart. Pool decides (package
// decide, package override) and reports; the workers (package workers)
// own the slots, the starts and stops, the backoff, the victims, the quiet
// phase and the rollout, and the tick drives them after the decision.
// Both are the loop's alone.
//
// The files: pool.go (life cycle, the operator's operations), loop.go (the
// owner, its messages, the calls in flight), tick.go (one control cycle, in
// three phases), package acting (the acting jobs' runner), package
// snapshot (what readers see), drain.go (draining the whole pool);
// package workers (issue 28) is the side that owns the units: their slots
// (internal/slots), victims, starting and stopping, the acting jobs'
// starts, stops and listings, the quiet phase, what holds a start back
// (the admit package), the rollout, a service pool's replicas (issue 19:
// readiness, the prober, the port guard, discovery, the drain after
// leaving it; the ports themselves are the replicas package's), gang
// groups and the workers' CPU samples; it does not import this package,
// which hands it workers.Deps;
// the decision: package decide (the local pipeline with the daemon-wide
// host guard and the source's reads, the fleet decider with its
// coordinator, explain's steps; decider.go is what it asks of the pool),
// threads.go (the signals' bookkeeping), degraded.go, override.go
// and package override (pause and pin), explain.go; view.go (the facts
// status and explain show, published on package snapshot), report.go (the
// decisions' journal, what the daemon hears), state.go (what survives a
// restart), package watch (the source's wake-ups), srcguard.go (opening
// the source), deps.go (what the pool needs from systemd, its clock).
package controller

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/capacity"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/acting"
	"github.com/flexiq/flexiq-scaled/internal/controller/decide"
	"github.com/flexiq/flexiq-scaled/internal/controller/override"
	"github.com/flexiq/flexiq-scaled/internal/controller/snapshot"
	"github.com/flexiq/flexiq-scaled/internal/controller/watch"
	"github.com/flexiq/flexiq-scaled/internal/controller/workers"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	fleetmode "github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/portowner"
	"github.com/flexiq/flexiq-scaled/internal/probe"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

const (
	callTimeout   = units.CallTimeout // one D-Bus round trip
	sourceLogRate = time.Minute
	// drainPoll is how often Drain re-lists while it waits for the units
	// to go: a stop is short next to the drain timeouts it waits out.
	drainPoll = 250 * time.Millisecond
)

// Options are a pool's ties to the daemon.
type Options struct {
	// StateDir holds the pool's state file (see state.go), so that a restart
	// of the daemon changes no scaling decision. "" keeps no state.
	StateDir string
	// OnChange is called after a tick, an operation or a drain that
	// changed the pool's Status, possibly from the pool's loop: it must not
	// wait for the pool's operations (a kick of a channel, as the daemon's).
	OnChange func()
	// Clock is the controller's time; nil is MonotonicClock. Tests inject
	// their own.
	Clock Clock
	// NewSource opens the pool's source; nil is source.New.
	NewSource func(config.Source) (source.Source, error)
	// NewPromQL opens the daemon's [prometheus] for the rules' promql()
	// (decide/promql.go); nil is source.NewPromQL.
	NewPromQL func(config.Prometheus) source.PromQL
	// Guard is the daemon's host guard, shared by its pools; nil is none.
	Guard *HostGuard
	// Ledger is the host's worker budget, shared by the daemon's pools;
	// nil grants every start.
	Ledger *capacity.Ledger
	// OverrideDir keeps the operator's pause and pin (package override) across
	// restarts and reboots; "" keeps them in memory only.
	OverrideDir string
	// WallClock is the operator's time, for --for deadlines; nil is
	// time.Now.
	WallClock func() time.Time
	// OnTick, when set, is called after every tick, from the pool's loop
	// when it runs, with what it saw and decided (snapshot.TickReport); as
	// OnChange, it must not wait for the pool's operations.
	OnTick func(api.TickReport)
	// Commands runs a service pool's probe commands and discovery
	// after-change commands; the daemon's runs each as a transient unit
	// (units.Manager.CommandRunner). nil runs them as the daemon's
	// children (source.ProcessGroupRunner).
	Commands source.CommandRunner
	// ProbeCommands runs a service pool's command readiness probes as
	// user and group (config.Pool.ProbeAccount); the daemon's is its
	// Commands runner As them (units.CommandRunner.As). It is asked only
	// for a probe that does not run as the daemon; nil fails such a
	// probe rather than run it as root.
	ProbeCommands func(user, group string) source.CommandRunner
	// NewProber makes a service pool's readiness prober; nil is probe.New.
	// Tests inject one they drive.
	NewProber func(probe.Clock) workers.ReadinessProber
	// PortOwners reads the listening sockets of the host, whose owners a
	// service replica's ports are checked against (portguard.go); nil is
	// portowner.Dump. Tests inject a table of their own.
	PortOwners func() (*portowner.Table, error)
	// OpenFleetStore opens a fleet pool's coordination store (issue 20);
	// nil is the real Redis or PostgreSQL store the URL names. Tests
	// inject a fake.
	OpenFleetStore func(config.Fleet) (fleetmode.Store, error)
}

// Pool runs one configured pool. Every field below the first block is its
// owner's alone (loop.go), but for snap and progress, which any goroutine
// reads.
type Pool struct {
	name  string
	units Units
	log   *eventlog.Logger
	opts  Options
	clock Clock
	// wall is the operator's time (Options.WallClock), which override
	// deadlines and status are on.
	wall func() time.Time
	own  owner

	// cfg is the pool as this host runs it: for a fleet pool, with the
	// bounds 0..capacity (decide.LocalBounds).
	cfg *config.Pool
	// dec is the pool's decision (package decide): its local pipeline, or
	// a fleet's decider. flWake is the fleet's, nil for a local pool, for
	// the source's wake-ups and status (any goroutine).
	dec    decide.Decider
	flWake atomic.Pointer[decide.Fleet]
	// stopWhy is the last Drain's reason, which Close gives the fleet's
	// journal entry when it resigns.
	stopWhy string
	src     source.Source
	// srcGen counts the sources: a read of a source that a reload has
	// since replaced is discarded by its number.
	srcGen uint64
	// workers are the pool's slots, starts and stops, backoff, quiet phase
	// and rollout (workers.go): what follows the decision.
	workers *workers.Workers
	threads threadState
	state   stateFile // what survives a restart (state.go)
	report  reporter
	// The operator's surface (override.go, view.go, explain.go).
	override *override.Keeper
	health   sourceHealth
	degraded degradedState   // degraded.go
	pub      *snapshot.Board // what readers see (package snapshot)

	// acting runs the starts and stops off the loop (package acting); inLoop is
	// set while the loop (Run) owns the pool.
	acting  *acting.Runner
	inLoop  bool
	wake    wakeup
	watch   watch.Watch          // the source's wake-up (package watch)
	cold    ColdWake             // the wake address's requests (coldwake.go)
	reading *pendingRead         // the tick waiting for its calls (loop.go)
	parked  *parkedTick          // the tick waiting for its replacements (loop.go)
	lastObs snapshot.Observation // the tick's reading, for its report
	tell    *tells               // what the daemon hears (report.go)
}

// NewPool prepares a pool; it starts nothing until Start.
func NewPool(cfg *config.Pool, u Units, log *eventlog.Logger, opts Options) (*Pool, error) {
	if opts.Clock == nil {
		opts.Clock = MonotonicClock
	}
	if opts.NewSource == nil {
		opts.NewSource = source.New
	}
	// Every entry of the pool carries FLEXIQ_POOL and starts "pool=NAME ".
	log = log.With("pool", cfg.Name)
	src, err := openSource(opts.NewSource, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", cfg.Name, err)
	}
	p := &Pool{
		name:   cfg.Name,
		units:  u,
		log:    log,
		opts:   opts,
		clock:  opts.Clock,
		own:    newOwner(),
		cfg:    decide.LocalBounds(cfg),
		src:    src,
		report: newReporter(log),
		state:  newStateFile(cfg.Name, opts.StateDir),
		tell:   &tells{onChange: opts.OnChange, onTick: opts.OnTick},
		acting: acting.NewRunner(),
		wake:   make(wakeup, 1),
	}
	p.override = override.New(cfg.Name, opts.OverrideDir, log, opts.WallClock, overrideChanged(p))
	p.wall = p.override.Now
	p.cold.pool, p.cold.kick, p.cold.clock, p.cold.log = p.name, p.wake.kick, p.clock, log
	p.workers = workers.New(workers.Deps{Name: p.name, Units: p.units, Jobs: p.acting, Log: p.log, Ledger: opts.Ledger, StateDir: opts.StateDir, Kick: p.wake.kick, Cfg: p.cfg})
	p.watch = watch.New(log, p.clock, fleetWake(p.wake.kick, &p.flWake))
	p.workers.Ready = workers.NewGate(p.workers)
	if cfg.Service != nil {
		if p.workers.Svc, err = workers.NewService(cfg, p.clock, serviceOptions(opts), p.workers); err != nil {
			src.Close()
			return nil, err
		}
	}
	p.dec, err = decide.New(cfg, deciderHooks{p}, deciderOptions(log, opts))
	if err != nil {
		p.workers.Svc.Close()
		src.Close()
		return nil, err
	}
	p.flWake.Store(decide.FleetOf(p.dec))
	p.pub = snapshot.New(Status{Name: cfg.Name, Max: cfg.MaxWorkers, Mode: p.override.Mode(p.wall(), dryRun(p.cfg)), GroupSize: cfg.GroupSize()}, p.cfg.PollInterval)
	p.tell.progressed()
	return p, nil
}

// Name is the pool's name.
func (p *Pool) Name() string { return p.name }

// Status is the pool's summary as of its last tick.
func (p *Pool) Status() Status { return p.pub.Status() }

// PollInterval is the pool's current tick interval.
func (p *Pool) PollInterval() time.Duration { return p.pub.Interval() }

// LastProgress is when the pool last completed a tick (or started); the
// watchdog uses it to tell a slow pool from a wedged one.
func (p *Pool) LastProgress() time.Time { return p.tell.last() }

// Start adopts the pool's running workers (from a previous daemon), restores
// what the previous daemon decided, and brings the pool to its target.
func (p *Pool) Start(ctx context.Context, existing []units.Worker) {
	var changed bool
	p.do(func() {
		changed = p.start(ctx, existing)
		p.dec.Ticked(p.src)
	})
	p.dec.Start()
	p.tell.progressed()
	p.tell.changed(changed)
}

func (p *Pool) start(ctx context.Context, existing []units.Worker) bool {
	now := p.clock()
	// Workers a previous daemon quieted are draining, not live (quiet.go).
	p.workers.RestoreQuiet(now, existing)
	p.override.Load()
	p.workers.EndedWhileAway(now, existing)
	p.workers.Reconcile(ctx, now, existing)
	p.workers.QuietStep(ctx, now)
	adopted := p.workers.Live()
	p.workers.Target = max(adopted, p.cfg.MinWorkers)
	p.state.restoreInto(now, p.cfg, p.workers, p.dec.Memory(), p.log)
	// As the HPA does for a target it has no history of, the count found
	// counts as a recommendation made now, so that the first ticks cannot
	// drop below it within the scale-down window. With a restored history
	// too: while the daemon was down nothing was recorded, and the ticks it
	// missed would have kept the window open for what was running then.
	if adopted > 0 {
		p.dec.Memory().Recommender().Seed(now, adopted)
	}
	p.workers.Target = min(max(p.workers.Target, p.cfg.MinWorkers), p.cfg.MaxWorkers)
	if adopted > 0 {
		p.log.Event(eventlog.Lifecycle, eventlog.Info, nil, "adopted %d running workers", adopted)
	}
	if o := p.override.InForce(p.wall()); o.Kind == api.OverridePinned {
		p.workers.Target = min(o.Workers, p.cfg.MaxWorkers)
		p.workers.DrainDownTo(ctx, now, p.workers.Target)
	}
	p.workers.StartUpTo(ctx, now, p.workers.Target, "min_workers")
	p.settleOutside()
	p.workers.Svc.PublishReady(ctx, now)
	p.state.saveFrom(now, p.workers, p.dec.Memory(), p.log)
	changed := p.pub.Publish(p.facts(now), nil, nil, existing, nil)
	return changed
}

// Update applies a reloaded configuration at once: the loop is woken for a
// tick under the new bounds, interval and definition. A changed source is
// reopened, and a read of the old one still running is given up: the tick
// starts again on the new source without waiting for it.
func (p *Pool) Update(cfg *config.Pool) error {
	var err error
	p.do(func() { err = p.update(cfg) })
	return err
}

func (p *Pool) update(cfg *config.Pool) error {
	dec, err := decide.Reload(p.dec, cfg, p.src, deciderOptions(p.log, p.opts))
	if err != nil {
		return err
	}
	p.dec = dec
	p.flWake.Store(decide.FleetOf(dec))
	full := cfg
	cfg = decide.LocalBounds(cfg)
	if err := p.workers.Reconfigure(p.clock, serviceOptions(p.opts), cfg); err != nil {
		return err
	}
	if !reflect.DeepEqual(p.cfg.Source, cfg.Source) {
		src, err := openSource(p.opts.NewSource, cfg, p.log)
		if err != nil {
			return fmt.Errorf("pool %s: %w", cfg.Name, err)
		}
		// The old source is closed by the loop once its wake-up has ended
		// (rewatch): closed first, a reconnecting watcher could open a
		// connection that nobody closes.
		p.watch.Retire(p.src)
		p.src = src
		p.srcGen++
		p.abandonRead()
	}
	p.dec.Configure(full)
	p.cfg = cfg
	p.workers.Cfg = cfg
	p.pub.Reconfigured(cfg.PollInterval, cfg.MaxWorkers, p.override.Mode(p.wall(), dryRun(p.cfg)))
	// Starts not yet sent were decided under the old configuration.
	p.acting.Supersede()
	p.wake.kick()
	return nil
}

// Roll asks for every worker to be replaced, one max_surge at a time, as
// after a deploy of new worker code with no change to the configuration.
func (p *Pool) Roll(reason string) {
	p.do(func() {
		p.workers.Roll.Nonce = fmt.Sprintf("%d", time.Now().UnixNano())
		p.workers.Roll.Reason = reason
		p.state.saveFrom(p.clock(), p.workers, p.dec.Memory(), p.log)
		p.acting.Supersede()
		p.wake.kick()
	})
}

// wakeup wakes the pool's loop.
type wakeup chan struct{}

// kick wakes the loop for a tick now; a wake already pending is enough.
func (w wakeup) kick() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// Close releases the pool's source; its loop has ended.
func (p *Pool) Close() error {
	if p.opts.Guard != nil {
		p.opts.Guard.Forget(p.name)
	}
	var srcs []source.Source
	var dec decide.Decider
	why := decide.StopPool
	p.do(func() {
		if p.stopWhy != "" {
			why = decide.StopPool + " (" + p.stopWhy + ")"
		}
		dec = p.dec
		p.dec = dec.Memory()
		p.flWake.Store(nil)
		srcs = append(p.watch.TakeRetired(), p.src)
		p.workers.Svc.Close()
		dec.Memory().Close()
	})
	// A stop or the pool's removal: a leader hands the lease over at once
	// rather than after its TTL.
	dec.Stop(why)
	var err error
	for i, s := range srcs {
		if cerr := s.Close(); i == len(srcs)-1 {
			err = cerr
		}
	}
	return err
}

// serviceOptions are the Options a service pool's side (package workers)
// runs its commands, probes and port checks with.
func serviceOptions(o Options) workers.ServiceOptions {
	return workers.ServiceOptions{Commands: o.Commands, ProbeCommands: o.ProbeCommands, NewProber: o.NewProber, PortOwners: o.PortOwners}
}
