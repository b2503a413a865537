// Package controller runs one pool: at each tick it lists the pool's units,
// reads the queue and the workers' CPU, asks the policy for a decision, and
// starts or drains worker units to follow it. The decision itself lives in
// package policy and the D-Bus calls behind the Units interface (package
// units); what the pool knows of its units is in fleet, which does no I/O.
//
// The files: pool.go (life cycle), tick.go (one control cycle), fleet.go
// (slots, backoff, victims), act.go (starting and stopping), rollout.go,
// state.go (what survives a restart), report.go (journal and status),
// cpu.go.
package controller

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/capacity"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

const (
	startTimeout  = units.StartTimeout // one start job, Type=exec: the exec itself
	callTimeout   = units.CallTimeout  // one D-Bus round trip
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
	// OnChange is called, without the pool's locks, after a tick or a drain
	// that changed the pool's Status.
	OnChange func()
	// Clock is the controller's time; nil is MonotonicClock. Tests inject
	// their own.
	Clock Clock
	// NewSource opens the pool's source; nil is source.New.
	NewSource func(config.Source) (source.Source, error)
	// Guard is the daemon's host guard, shared by its pools; nil is none.
	Guard *HostGuard
	// Ledger is the host's worker budget, shared by the daemon's pools;
	// nil grants every start.
	Ledger *capacity.Ledger
	// OverrideDir keeps the operator's pause and pin (override.go) across
	// restarts and reboots; "" keeps them in memory only.
	OverrideDir string
	// WallClock is the operator's time, for --for deadlines; nil is
	// time.Now.
	WallClock func() time.Time
	// OnTick, when set, is called after every tick, without the pool's
	// locks, with what it saw and decided (tickreport.go).
	OnTick func(api.TickReport)
}

// Pool runs one configured pool.
type Pool struct {
	name  string
	units Units
	log   *eventlog.Logger
	opts  Options
	clock Clock

	// mu is held for a whole tick, D-Bus calls included: a pool does one
	// thing at a time. Nothing else waits on it: the summary below has its
	// own lock, so the watchdog never waits behind a slow tick.
	mu  sync.Mutex
	cfg *config.Pool
	src source.Source
	// retired are sources replaced by a reload, closed once their wake-up
	// has ended.
	retired []source.Source
	rec     policy.Recommender
	fleet   *fleet
	target  int // the last decided count; crashed workers are replaced up to it
	roll    rollout
	threads threadState
	sc      scaling // rules, rate limits, the host guard (guard.go)
	demand  demandState
	report  reporter
	// stopping is set by Drain: the pool no longer scales or replaces.
	stopping bool
	ready    readyState            // readiness.go
	quiet    map[string]*quietUnit // quiet.go: workers in their quiet phase
	// The operator's surface (override.go, view.go, explain.go).
	override api.Override
	health   sourceHealth
	restarts map[int]int // crashes by slot, for status
	lastDry  decisionKey // the last "would scale" logged in dry-run
	view     viewState

	summary  summary
	wake     chan struct{}
	watch    watchState   // the source's wake-up (wake.go); Run's alone
	progress atomic.Int64 // unix nanos (wall clock) of the last completed tick
	lastObs  lastObservation
}

// NewPool prepares a pool; it starts nothing until Start.
func NewPool(cfg *config.Pool, u Units, log *eventlog.Logger, opts Options) (*Pool, error) {
	if opts.Clock == nil {
		opts.Clock = MonotonicClock
	}
	if opts.NewSource == nil {
		opts.NewSource = source.New
	}
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
		cfg:    cfg,
		src:    src,
		fleet:  newFleet(),
		report: newReporter(cfg.Name, log),
		wake:   make(chan struct{}, 1),

		restarts: map[int]int{},
	}
	if err := p.setRules(cfg); err != nil {
		src.Close()
		return nil, err
	}
	p.summary.set(Status{Name: cfg.Name, Max: cfg.MaxWorkers, Mode: p.modeString(p.wallNow())}, cfg.PollInterval)
	p.progress.Store(time.Now().UnixNano())
	return p, nil
}

// Name is the pool's name.
func (p *Pool) Name() string { return p.name }

// Status is the pool's summary as of its last tick.
func (p *Pool) Status() Status { return p.summary.status() }

// PollInterval is the pool's current tick interval.
func (p *Pool) PollInterval() time.Duration { return p.summary.poll() }

// LastProgress is when the pool last completed a tick (or started); the
// watchdog uses it to tell a slow pool from a wedged one.
func (p *Pool) LastProgress() time.Time { return time.Unix(0, p.progress.Load()) }

// Start adopts the pool's running workers (from a previous daemon), restores
// what the previous daemon decided, and brings the pool to its target.
func (p *Pool) Start(ctx context.Context, existing []units.Worker) {
	p.mu.Lock()
	now := p.clock()
	// Workers a previous daemon quieted are draining, not live (quiet.go).
	p.restoreQuiet(now, existing)
	p.loadOverride()
	p.apply(ctx, now, p.fleet.reconcile(now, existing))
	p.quietStep(ctx, now)
	adopted := len(p.fleet.live)
	p.target = max(adopted, p.cfg.MinWorkers)
	if st, why := p.loadState(now); st != nil {
		p.restore(now, st)
		p.log.Event(eventlog.Lifecycle, eventlog.Info, p.fields(nil),
			"pool=%s restored its state from %s: target %d, %d recommendations in its windows", p.name, p.statePath(), p.target, len(st.History))
	} else if why != "" {
		p.log.Event(eventlog.Lifecycle, eventlog.Warning, p.fields(nil), "pool=%s ignoring its state file: %s", p.name, why)
	}
	// As the HPA does for a target it has no history of, the count found
	// counts as a recommendation made now, so that the first ticks cannot
	// drop below it within the scale-down window. With a restored history
	// too: while the daemon was down nothing was recorded, and the ticks it
	// missed would have kept the window open for what was running then.
	if adopted > 0 {
		p.rec.Seed(now, adopted)
	}
	p.target = min(max(p.target, p.cfg.MinWorkers), p.cfg.MaxWorkers)
	if adopted > 0 {
		p.log.Event(eventlog.Lifecycle, eventlog.Info, p.fields(nil), "pool=%s adopted %d running workers", p.name, adopted)
	}
	if o := p.activeOverride(p.wallNow()); o.Kind == api.OverridePinned {
		p.target = min(o.Workers, p.cfg.MaxWorkers)
		p.drainDownTo(ctx, now, p.target)
	}
	p.startUpTo(ctx, now, p.target, "min_workers")
	p.saveState(now)
	changed := p.publish(nil, nil)
	p.buildView(now, existing, nil)
	p.mu.Unlock()
	p.progress.Store(time.Now().UnixNano())
	p.notify(changed)
}

// Run ticks until ctx ends. A reload that changes the interval wakes it, so
// that the new interval holds from then on rather than after the old one. A
// source that can tell when work arrives wakes it early (see wake.go).
func (p *Pool) Run(ctx context.Context) {
	timer := time.NewTimer(p.PollInterval())
	defer timer.Stop()
	defer p.stopWatch()
	for {
		p.rewatch(ctx)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-p.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		p.Tick(ctx)
		timer.Reset(p.PollInterval())
	}
}

// Update applies a reloaded configuration at once: the loop is woken for a
// tick under the new bounds, interval and definition. A changed source is
// reopened.
func (p *Pool) Update(cfg *config.Pool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.setRules(cfg); err != nil {
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
		p.retired = append(p.retired, p.src)
		p.src = src
	}
	p.cfg = cfg
	st := p.summary.status()
	st.Max = cfg.MaxWorkers
	st.Mode = p.modeString(p.wallNow())
	p.summary.set(st, cfg.PollInterval)
	p.kick()
	return nil
}

// Roll asks for every worker to be replaced, one max_surge at a time, as
// after a deploy of new worker code with no change to the configuration.
func (p *Pool) Roll(reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.roll.nonce = fmt.Sprintf("%d", time.Now().UnixNano())
	p.roll.reason = reason
	p.saveState(p.clock())
	p.kick()
}

// kick wakes the loop for a tick now; a wake already pending is enough.
func (p *Pool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Close releases the pool's source.
func (p *Pool) Close() error {
	if p.opts.Guard != nil {
		p.opts.Guard.forget(p.name)
	}
	for _, old := range p.takeRetired() {
		old.Close()
	}
	return p.src.Close()
}

// takeRetired hands over the sources replaced by reloads, to be closed.
func (p *Pool) takeRetired() []source.Source {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.retired
	p.retired = nil
	return old
}

func (p *Pool) notify(changed bool) {
	if changed && p.opts.OnChange != nil {
		p.opts.OnChange()
	}
}
