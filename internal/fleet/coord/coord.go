package coord

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// Config is one pool's coordination settings.
type Config struct {
	Pool string // the pool's name, as the store keys it
	ID   string // this host's id (/etc/machine-id)
	// Incarnation tells this coordinator from an earlier one of the same
	// host (a restarted daemon): the lease's holder is ID#Incarnation, so
	// that a new incarnation never renews a lease it did not take, even
	// when it knows that lease's epoch, and every term has an epoch of its
	// own. "" holds the lease as ID alone.
	Incarnation string
	// Interval is the tick: the heartbeat's and the leader's decision's
	// (fleet.DefaultHeartbeat when <= 0). It must be well inside TTL.
	Interval time.Duration
	TTL      time.Duration // the lease's (fleet.DefaultTTL when <= 0)
	Renew    time.Duration // between Acquires (TTL/3 when <= 0)
	// Jitter spreads each renewal by ±Jitter×Renew (fleet.RenewJitter when <= 0; at
	// most 0.5), so that the hosts' Acquires do not march in step.
	Jitter float64
	// Hold is how long a stale plan is held after the TTL (2 TTLs when
	// <= 0), MinWorkers the fleet's min_workers (the fallback's base).
	Hold       time.Duration
	MinWorkers int
	// CallTimeout bounds each store call (Interval/2 when <= 0).
	CallTimeout time.Duration
	// Initial is the target the pool applies when the coordinator starts
	// (what it ran before a restart: it keeps its workers); negative: the
	// host's live count at the first tick.
	Initial int
}

// Holder is the lease's holder for this coordinator: ID#Incarnation.
func (c Config) Holder() string {
	if c.Incarnation == "" {
		return c.ID
	}
	return c.ID + HolderSep + c.Incarnation
}

// HolderSep separates a lease holder's host id from its incarnation.
const HolderSep = "#"

// HostOf is the host id of a lease holder.
func HostOf(holder string) string {
	id, _, _ := strings.Cut(holder, HolderSep)
	return id
}

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = fleet.DefaultHeartbeat
	}
	if c.TTL <= 0 {
		c.TTL = fleet.DefaultTTL
	}
	if c.Renew <= 0 {
		c.Renew = c.TTL / 3
	}
	if c.Jitter <= 0 {
		c.Jitter = fleet.RenewJitter
	}
	c.Jitter = min(c.Jitter, 0.5)
	if c.Hold <= 0 {
		c.Hold = 2 * c.TTL
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = c.Interval / 2
	}
	return c
}

// Input is what the leader's source read gives the decision (fleet.Tick's
// fields that the caller builds): Params with the fleet-wide min_workers
// and max_workers, Signals with the fleet's live total as Workers.
type Input struct {
	Params  policy.Params
	Obs     policy.Observation
	Signals policy.Signals
	Prom    map[string]policy.PromResult
}

// Deps are what the coordinator calls.
type Deps struct {
	Store fleet.Store
	// Now is the host's clock (monotonic); time.Now when nil.
	Now func() time.Time
	// Rand is in [0,1), for the renewal's jitter; math/rand/v2's when nil.
	Rand func() float64
	// Self is this host's own heartbeat: capacity, live, starting,
	// draining and version, from the pool's published snapshot (ID and
	// SeenAt are filled in here and by the store).
	Self func() fleet.Member
	// Source reads the pool's source once, for the leader's decision, at
	// the store's clock storeNow, for the fleet's live totals.
	Source func(ctx context.Context, storeNow time.Time, totals fleet.Totals) (Input, error)
	// Pipeline is the pool's decision pipeline, as the controller builds
	// it; its memory is scratch (fleet.Decide), owned by the coordinator.
	Pipeline *policy.Pipeline
	// Events receives the journal's events; nil drops them.
	Events Events
}

// Status is what the coordinator publishes after each tick: what the pool
// applies, and what status, explain and the metrics show.
type Status struct {
	Pool, ID string
	At       time.Time // the tick's, host clock
	Ticks    uint64
	// Target is what this host's pool applies; Apply says why.
	Target int
	Apply  fleet.Apply
	// Leader says whether this host leads, at Epoch.
	Leader bool
	Epoch  uint64
	Lease  fleet.Lease // as the last Acquire returned it
	// Plan is the plan held (without its State), PlanErr why the last
	// one read was ignored.
	Plan    fleet.Plan
	Ignored string
	// Members are the live members the leader last decided on (leader
	// only), Result its last decision.
	Members []fleet.Member
	Result  policy.Result
	// Reachable says whether every store call of the tick answered;
	// StoreErr is the tick's first failure, SourceErr the leader's source
	// read's.
	Reachable bool
	StoreErr  error
	SourceErr error
	// StateErr says why the last decision could not continue the old
	// windows (fleet.Decision.StateErr).
	StateErr error
	Calls    Calls // this tick's store calls
	Total    Calls // since New
}

// Coordinator is one pool's coordination loop. See the package doc for
// who may call what.
type Coordinator struct {
	cfg   Config
	deps  Deps
	store counting
	view  fleet.View

	wake    chan struct{}
	wakeReq atomic.Bool
	changed chan struct{}
	pub     atomic.Pointer[Status]
	// pipe is the decision pipeline (Deps.Pipeline, then SetPipeline's).
	pipe atomic.Pointer[policy.Pipeline]

	st tickState
}

// tickState is the owner's state between ticks.
type tickState struct {
	started   bool
	stopped   bool
	ticks     uint64
	last      int // the target applied now
	leading   bool
	epoch     uint64
	renewedAt time.Time // host clock, when the last good renewal was sent
	nextAcq   time.Time
	lease     fleet.Lease
	skew      time.Duration // store clock - host clock, at the last read
	needPrev  bool
	prev      fleet.Plan // the plan to continue (leader)
	hosts     int        // live members last seen (leader), for fallback
	members   []fleet.Member
	result    policy.Result
	ignored   string
	firstErr  error
	sourceErr error
	stateErr  error
	calls     Calls
	total     Calls
	ep        episodes
	// badMembers are the members the store could not read at the last
	// read, each named once in the journal while it stays so.
	badMembers map[string]bool
	sightings  fleet.Sightings
}

// New checks cfg and deps and returns a coordinator that has not ticked.
func New(cfg Config, deps Deps) (*Coordinator, error) {
	switch {
	case cfg.Pool == "" || cfg.ID == "":
		return nil, errors.New("fleet coordinator: a pool and a host id are needed")
	case deps.Store == nil || deps.Self == nil || deps.Source == nil || deps.Pipeline == nil:
		return nil, fmt.Errorf("fleet coordinator %s: a store, Self, Source and a pipeline are needed", cfg.Pool)
	}
	cfg = cfg.withDefaults()
	if cfg.Interval*2 > cfg.TTL {
		return nil, fmt.Errorf("fleet coordinator %s: the tick %s is not well inside the TTL %s (at most TTL/2)", cfg.Pool, cfg.Interval, cfg.TTL)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Rand == nil {
		deps.Rand = rand.Float64
	}
	if deps.Events == nil {
		deps.Events = EventsFunc(func(Event) {})
	}
	c := &Coordinator{cfg: cfg, deps: deps, wake: make(chan struct{}, 1), changed: make(chan struct{}, 1)}
	c.store = counting{s: deps.Store, n: &c.st.calls}
	c.pipe.Store(deps.Pipeline)
	c.view.ID = cfg.ID
	c.pub.Store(&Status{Pool: cfg.Pool, ID: cfg.ID, Target: max(cfg.Initial, 0)})
	return c, nil
}

// Snapshot is the status published by the last tick. Safe from any
// goroutine; the caller must not modify it.
func (c *Coordinator) Snapshot() *Status { return c.pub.Load() }

// Changed receives after a tick that changed the target or the
// leadership (one pending signal at most).
func (c *Coordinator) Changed() <-chan struct{} { return c.changed }

// SetPipeline replaces the decision pipeline from the next decision on (a
// reload changed the pool's policy). p must be the coordinator's alone: its
// memory is scratch, as Deps.Pipeline's. Safe from any goroutine.
func (c *Coordinator) SetPipeline(p *policy.Pipeline) {
	if p != nil {
		c.pipe.Store(p)
	}
}

// Wake asks for an Acquire at the next tick and, under Run, for that tick
// now: the lease was released. Safe from any goroutine.
func (c *Coordinator) Wake() {
	c.wakeReq.Store(true)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run ticks every Interval, and at once on Wake, until ctx ends. It does
// not resign: the caller decides whether the stop is a handover
// (systemctl stop: Resign after Run returned) or not (a reload).
//
// A leader writes its plan at most once per tick: a Wake that comes less
// than minPlanGap of a tick after its last step moves its next step to
// then, instead of stepping at once (a follower steps at once: a released
// lease is taken within a second).
func (c *Coordinator) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
			if gap := c.minGap(); c.st.leading && c.deps.Now().Sub(last) < gap {
				if !timer.Stop() {
					select {
					case <-timer.C:
					default:
					}
				}
				timer.Reset(gap - c.deps.Now().Sub(last))
				continue
			}
		case <-timer.C:
		}
		last = c.deps.Now()
		c.Step(ctx)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(c.cfg.Interval)
	}
}

// minGap is the least time between two of a leader's steps: 0.9 of a
// tick, the rest being the timers' own slack.
func (c *Coordinator) minGap() time.Duration { return c.cfg.Interval * 9 / 10 }

// Resign gives the lease up (Store.Release) if this host leads, so that
// another host leads at once, sends a last heartbeat (Deps.Self as it is
// now: a host that drained its workers leaves a count of none in the store,
// not its last tick's), and stops the coordinator: later ticks, and a
// second Resign, do nothing. Whether or not the store answers, this host
// never writes with that epoch again. The error is the release's: a lost
// last heartbeat only ages out, as a crashed host's does. Owner only.
func (c *Coordinator) Resign(ctx context.Context) error {
	st := &c.st
	if st.stopped {
		return nil
	}
	st.stopped = true
	defer c.lastHeartbeat(ctx)
	if !st.leading {
		return nil
	}
	epoch, now := st.epoch, c.deps.Now()
	c.stepDown(now, ReasonResigned, nil)
	defer func() { c.publish(now, c.pub.Load().Apply) }()
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	if err := c.store.Release(cctx, c.cfg.Pool, c.cfg.Holder(), epoch); err != nil {
		return fmt.Errorf("fleet pool %s: resigning epoch %d: %w", c.cfg.Pool, epoch, err)
	}
	return nil
}

// lastHeartbeat is Resign's heartbeat, once the coordinator has ticked (one
// that never did has not joined: it leaves no member behind).
func (c *Coordinator) lastHeartbeat(ctx context.Context) {
	if !c.st.started {
		return
	}
	m := c.deps.Self()
	m.ID, m.SeenAt = c.cfg.ID, time.Time{}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	_ = c.store.Heartbeat(cctx, c.cfg.Pool, m)
}
