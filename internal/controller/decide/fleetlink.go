package decide

// A pool that joins a fleet (issue 20, [pools.NAME.fleet]): one leader in
// the fleet reads the queue and decides the fleet's target; every host
// applies its own share of it with the pool's usual machinery (starts
// claimed from the host's budget, stops drained).
//
// The coordination runs in a goroutine of its own (coord.Coordinator.Run),
// not in the pool's tick: its heartbeat and the lease's renewal must keep
// their cadence while a tick waits for systemd, or a busy host would be
// counted gone and its leadership would flap. The two sides meet only
// through published values: the pool's owner hands the coordinator its
// source read (sourcePlan) and its numbers (fleet.Member) through atomic
// pointers, and reads the coordinator's Snapshot at its tick; Changed and
// the store's release notifications wake the pool.
//
// On this host the pool's own bounds become 0..capacity (LocalBounds): the
// configured min_workers and max_workers are the fleet's, and the leader's
// pipeline applies them to the fleet's totals.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/fleet/coord"
	"github.com/flexiq/flexiq-scaled/internal/fleet/stores"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/version"
)

// resignTimeout bounds the release of the lease at a stop: the stop must
// not wait on a store that does not answer (the lease then lapses by its
// TTL, as after a crash).
const resignTimeout = 2 * time.Second

// fleetLink is a fleet pool's coordination: its coordinator and what the
// pool's owner publishes for it.
type fleetLink struct {
	cfg config.PoolFleet
	// pool is the pool as configured (the fleet's min_workers and
	// max_workers); a reload that keeps the fleet's settings replaces it.
	pool  atomic.Pointer[config.Pool]
	store fleet.Store
	c     *coord.Coordinator
	log   *eventlog.Logger

	// plan is the source read the leader runs, handed over by the pool's
	// owner at each tick (and at a reload).
	plan atomic.Pointer[sourcePlan]
	// self is this host's heartbeat, published by the pool's owner.
	self atomic.Pointer[fleet.Member]
	// lastRead is the leader's last source read, for status and explain.
	lastRead atomic.Pointer[leaderRead]
	// leaving: the host hands its share over before a stop (Fleet.Leave):
	// its heartbeat says capacity 0.
	leaving atomic.Bool
	// resignWhy is what ended the coordination, for the journal's
	// leader-lost entry at the resignation (stop sets it, after Run).
	resignWhy string

	cancel context.CancelFunc
	done   chan struct{}
}

// leaderRead is one of the leader's source reads.
type leaderRead struct {
	at  time.Time // wall clock
	obs Observed
}

// incarnation is a new coordinator's own part of its lease holder, so
// that a restarted daemon takes a new term rather than renewing the old
// one (coord.Config.Incarnation).
func incarnation() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// fleetCapacity is the workers this host holds for a fleet pool: its
// capacity as configured or as the capacity check resolved "auto"; with
// "auto" unresolved (no capacity check ran), max_workers.
func fleetCapacity(cfg *config.Pool) int {
	if cfg.Fleet.Capacity > 0 {
		return cfg.Fleet.Capacity
	}
	return cfg.MaxWorkers
}

// newFleetLink prepares the coordination of cfg's pool; nothing runs
// before start.
func newFleetLink(cfg *config.Pool, rules *policy.RuleSet, log *eventlog.Logger, open func(config.Fleet) (fleet.Store, error)) (*fleetLink, error) {
	if open == nil {
		open = stores.Open
	}
	store, err := open(cfg.Fleet.Fleet)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", cfg.Name, err)
	}
	l := &fleetLink{cfg: *cfg.Fleet, store: store, log: log}
	l.pool.Store(cfg)
	pl := fleetPipeline(cfg, rules)
	f := cfg.Fleet.Fleet
	l.c, err = coord.New(coord.Config{
		Pool: cfg.Name, ID: f.HostID, Incarnation: incarnation(), Interval: f.Heartbeat, TTL: f.TTL, Renew: f.Renew, Hold: f.Hold,
		MinWorkers: cfg.MinWorkers, Initial: -1,
	}, coord.Deps{
		Store: store, Self: l.member, Source: l.source, Pipeline: pl, Events: coord.EventsFunc(l.event),
	})
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("pool %s: %w", cfg.Name, err)
	}
	return l, nil
}

// fleetPipeline is the leader's decision pipeline for cfg, its own (the
// coordinator's goroutine runs it; its memory is the plan's) over the
// pool's compiled rules (nil unless policy = "rules"), compiled once.
func fleetPipeline(cfg *config.Pool, rules *policy.RuleSet) *policy.Pipeline {
	if rules != nil {
		rules = rules.Fresh()
	}
	return policy.NewPipeline(cfg.Scaling.Policy, cfg.Scaling.Behavior, rules)
}

// start runs the coordinator until stop. wake is the pool's kick.
func (l *fleetLink) start(wake func()) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		go l.listen(ctx)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-l.c.Changed():
					wake()
				}
			}
		}()
		l.c.Run(ctx)
	}()
}

// listen wakes the coordinator when the lease is released (another
// host's clean stop), so that this host may lead within a second rather
// than a TTL. An optimisation only: without it, the lease lapses.
func (l *fleetLink) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := stores.Releases(ctx, l.store, l.pool.Load().Name, l.c.Wake)
		if errors.Is(err, stores.ErrNoReleases) {
			return
		}
		if err != nil && ctx.Err() == nil {
			// The store is down or refuses: the ticks say so; try again.
			select {
			case <-ctx.Done():
			case <-time.After(max(l.cfg.Heartbeat, time.Second)):
			}
		}
	}
}

// stop ends the coordinator and resigns (coord.Coordinator.Resign): a
// leader gives its lease up so that another host leads at once, and the
// last heartbeat leaves the store this host's counts as they are now (none
// after a drain). why says what ended it (the daemon's stop or restart,
// the pool's removal, a reload that changed the fleet), for the journal.
// Its workers stay: a restart keeps them.
func (l *fleetLink) stop(why string) {
	if l.cancel != nil {
		l.cancel()
		<-l.done
	}
	l.resignWhy = why
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	if err := l.c.Resign(ctx); err != nil {
		l.log.Event(eventlog.FleetLeaderLost, eventlog.Warning, eventlog.Fields{"FLEXIQ_ERROR": err.Error()},
			"fleet: could not release the lease (it lapses by its TTL): %v", err)
	}
	cancel()
	l.store.Close()
}

// publish hands the coordinator the pool's current source read and this
// host's numbers; the pool's owner calls it.
func (l *fleetLink) publish(plan sourcePlan, live, starting, draining int) {
	l.plan.Store(&plan)
	l.self.Store(&fleet.Member{Capacity: fleetCapacity(l.pool.Load()), Live: live, Starting: starting, Draining: draining, Version: version.Version})
}

// member is this host's heartbeat (coord.Deps.Self).
func (l *fleetLink) member() fleet.Member {
	m := fleet.Member{Capacity: fleetCapacity(l.pool.Load()), Version: version.Version}
	if pub := l.self.Load(); pub != nil {
		m = *pub
	}
	if l.leaving.Load() {
		m.Capacity = 0
	}
	return m
}

// source is the leader's read of the queue, once per tick for the fleet,
// and the decision's input on the fleet's totals (coord.Deps.Source).
func (l *fleetLink) source(ctx context.Context, _ time.Time, totals fleet.Totals) (coord.Input, error) {
	plan := l.plan.Load()
	if plan == nil {
		return coord.Input{}, errors.New("the pool has not ticked yet")
	}
	o := plan.read(ctx)
	l.lastRead.Store(&leaderRead{at: time.Now(), obs: o})
	if o.Err != nil {
		return coord.Input{}, o.Err
	}
	return fleetInput(l.pool.Load(), o, totals), nil
}

// fleetInput is the leader's decision input: the queue as read, the
// fleet's live and draining totals. Worker CPU and the host's readings are
// one host's and are not coordinated (the configuration refuses them in a
// fleet pool).
func fleetInput(cfg *config.Pool, o Observed, totals fleet.Totals) coord.Input {
	params := cfg.PolicyParams()
	if o.Threads.Asked && o.Threads.Found && o.Threads.Err == nil {
		params.ThreadsPerWorker = o.Threads.N
	}
	c := o.Counts
	obs := policy.Observation{
		Current: totals.Live, Valid: true, Pending: c.Pending,
		OldestAge: c.OldestAge, OldestKnown: c.HasOldest,
		Running: RunningOnLive(c.Running, totals.Draining, params.ThreadsPerWorker),
	}
	if d := o.Demand; d.Asked && d.Err == nil {
		obs.ArrivalRate, obs.ServiceTime, obs.DemandKnown = d.D.ArrivalRate, d.D.ServiceTime, d.D.Known
	}
	in := policy.NewInput(time.Time{}, params, obs, c.Paused, totals.Draining, policy.HostState{}, o.Prom)
	return coord.Input{Params: in.Params, Obs: in.Obs, Prom: in.Prom, Signals: in.Signals}
}

// event writes a coordination event to the journal (coord.Deps.Events).
func (l *fleetLink) event(e coord.Event) {
	f := eventlog.Fields{"FLEXIQ_EPOCH": strconv.FormatUint(e.Epoch, 10), "FLEXIQ_FLEET_HOST": l.cfg.HostID}
	if e.Err != nil {
		f["FLEXIQ_ERROR"] = e.Err.Error()
	}
	switch e.Kind {
	case coord.LeaderGained:
		l.log.Event(eventlog.FleetLeaderGained, eventlog.Notice, f, "fleet: leading the fleet at epoch %d", e.Epoch)
	case coord.LeaderLost:
		f["FLEXIQ_REASON"] = string(e.Reason)
		l.log.Event(eventlog.FleetLeaderLost, eventlog.Notice, f, "fleet: no longer leading (epoch %d): %s", e.Epoch, lostWhy(e, l.resignWhy))
	case coord.PlanStale:
		f["FLEXIQ_PLAN_AGE_SEC"] = fmt.Sprintf("%.1f", e.Age.Seconds())
		l.log.Event(eventlog.FleetPlanStale, eventlog.Warning, f,
			"fleet: the plan is %s old (no leader, or no store): holding this host's last target", e.Age.Round(100*time.Millisecond))
	case coord.PlanFallback:
		f["FLEXIQ_PLAN_AGE_SEC"] = fmt.Sprintf("%.1f", e.Age.Seconds())
		l.log.Event(eventlog.FleetPlanFallback, eventlog.Warning, f,
			"fleet: still no fresh plan after %s: this host runs at least its share of min_workers, and never fewer than now", e.Age.Round(100*time.Millisecond))
	case coord.PlanFresh:
		l.log.Event(eventlog.FleetPlanFresh, eventlog.Notice, f, "fleet: a fresh plan again (epoch %d)", e.Epoch)
	case coord.StoreUnreachable:
		l.log.Event(eventlog.FleetStoreUnreachable, eventlog.Warning, f, "fleet: the store does not answer: %v", e.Err)
	case coord.StoreRecovered:
		l.log.Event(eventlog.FleetStoreRecovered, eventlog.Notice, f, "fleet: the store answers again")
	case coord.MemberUnreadable:
		f["FLEXIQ_FLEET_MEMBER"] = e.Member
		l.log.Event(eventlog.FleetMemberUnreadable, eventlog.Warning, f, "fleet: the store's entry for member %q cannot be read, skipped: %v", e.Member, e.Err)
	}
}

// lostWhy says why a leader lost its lease; resigned is what made it
// resign (fleetLink.stop's why).
func lostWhy(e coord.Event, resigned string) string {
	switch e.Reason {
	case coord.ReasonFenced:
		return "another host holds the lease"
	case coord.ReasonExpired:
		return "the lease was not renewed within its TTL (paused, or the store silent)"
	case coord.ReasonResigned:
		if resigned == "" {
			resigned = "the coordination stopped"
		}
		return "resigned: " + resigned
	}
	return string(e.Reason)
}

// Why a fleet link stops (Decider.Stop), as the journal says it.
const (
	StopRestart = "the daemon restarts (its workers stay)"
	StopPool    = "the pool stopped"
)

// reloadWhy says what a reload changed that ends the pool's coordinator
// (Reload), old being the running link.
func reloadWhy(old *fleetLink, cfg *config.Pool) string {
	switch {
	case !cfg.Joins():
		return "a reload took the pool out of the fleet"
	case !reflect.DeepEqual(old.cfg.Conn, cfg.Fleet.Conn) || old.cfg.Store != cfg.Fleet.Store:
		return "a reload changed the fleet's store (nothing stopped)"
	case old.cfg.HostID != cfg.Fleet.HostID:
		return "a reload changed the host's id in the fleet (nothing stopped)"
	}
	return "a reload changed the fleet's settings (nothing stopped)"
}
