// Package decide is a pool's decision: at each tick, what the source read
// says and what the pool's policy makes of it. It has two deciders behind
// one interface (Decider): the local pipeline (Local: the pool's rules, its
// rate limits and windows, the daemon's host guard, read from the pool's
// own source) and the fleet decider (Fleet, issue 20: this host's share of
// the fleet leader's plan, with the coordinator that keeps the lease, the
// heartbeat and the plan in the fleet's store). The pool's tick asks its
// Decider, whichever it is; a reload swaps one for the other (Reload).
//
// It does no I/O of the pool's units: what it needs of the pool (the live
// count, the report of a source read, the threads per worker) it asks
// through Pool, which the pool's owner implements. Its methods are the
// owner's, as the pool's state is, unless they say otherwise.
package decide

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// Pool is what a decider needs of the pool it decides for. The pool's
// owner calls the decider, so these run on the owner too.
type Pool interface {
	// Live, Draining and Starting count the pool's workers: live, being
	// stopped, and (a service pool's) started but not ready yet.
	Live() int
	Draining() int
	Starting() int
	// Holds says that the pool will not act on a decision: the operator
	// holds it (pause, pin), or it only logs (dry-run).
	Holds() bool
	// Wall is the operator's time, for status and explain.
	Wall() time.Time
	// Observed takes in a tick's source read (the tick's report, its
	// failures logged without flooding).
	Observed(now time.Time, o Observed) (source.Counts, error)
	// Threads is the threads per worker the policy counts, after a read
	// of flexiq's.
	Threads(ThreadsRead) int
	// MeanUtil is the live workers' mean CPU utilisation, if known.
	MeanUtil() (float64, bool)
	// Kick wakes the pool's loop for a tick now (any goroutine).
	Kick()
}

// Decider is a pool's decision, local or a fleet's.
type Decider interface {
	// Reader is the tick's read of the source, which runs off the loop
	// on what it was handed.
	Reader(src source.Source) func(context.Context) Observed
	// Decide is the tick's decision, on what the tick's read found;
	// started is when the tick began (wall clock).
	Decide(now, started time.Time, read Observed) Tick
	// Acted records what the tick did, for the rate limits, the rules'
	// cooldowns and the guard's emergency cooldown.
	Acted(now time.Time, d policy.Decision)
	// Ticked hands a fleet's coordinator the pool's source read and this
	// host's numbers, after a tick or an operation.
	Ticked(src source.Source)
	// Configure follows a reload that succeeded: cfg is the pool as
	// configured (a fleet pool's bounds are the fleet's).
	Configure(cfg *config.Pool)

	// Start runs a fleet's coordinator; Stop ends it, saying why to the
	// journal, and resigns its lease; Leave hands this host's share of
	// the fleet to the others before a drain. A local pool does nothing.
	Start()
	Stop(why string)
	Leave(ctx context.Context)
	// View is status's fleet section, Summary the fleet in a few words
	// for STATUS=; nil and "" for a local pool.
	View() *api.FleetView
	Summary() string

	// Memory is the local pipeline: the pool's rules and the pipeline's
	// memory, which a fleet pool keeps too (a reload that leaves the fleet
	// goes on with it), and its part of the state file.
	Memory() *Local
}

// Tick is what a tick decided, and from what.
type Tick struct {
	D      policy.Decision
	E      *api.Explanation
	Obs    policy.Observation
	Counts source.Counts
	SrcErr error
	// Unread: the tick did not read the queue (a fleet's follower).
	Unread bool
}

// New is the decider of cfg's pool, as configured: local, or a fleet's
// when the pool joins one (its coordinator not yet started).
func New(cfg *config.Pool, pool Pool, o Options) (Decider, error) {
	l, err := newLocal(cfg, pool, o)
	if err != nil {
		return nil, err
	}
	if !cfg.Joins() {
		return l, nil
	}
	f, err := newFleet(l, cfg)
	if err != nil {
		l.Close()
		return nil, err
	}
	return f, nil
}

// Reload follows a reload of the pool's configuration cfg: it recompiles
// the rules if they changed, and swaps the fleet's coordinator when the
// pool joins, leaves, or changes its fleet's store, timings or fleet-wide
// min_workers (the old one resigns); otherwise the running one takes the
// new configuration and pipeline. src is the pool's source, which a new
// coordinator is handed at once; o the pool's ties as they are now.
func Reload(d Decider, cfg *config.Pool, src source.Source, o Options) (Decider, error) {
	l := d.Memory()
	l.opts = o
	if err := l.setRules(cfg); err != nil {
		return d, err
	}
	old, _ := d.(*Fleet)
	if old != nil && cfg.Joins() && old.sameFleet(cfg) {
		old.reconfigure(cfg)
		return old, nil
	}
	var next Decider = l
	if cfg.Joins() {
		f, err := newFleet(l, cfg)
		if err != nil {
			return d, err
		}
		next = f
	}
	if old != nil {
		old.Stop(reloadWhy(old.fl, cfg))
	}
	if f, ok := next.(*Fleet); ok {
		f.Ticked(src)
		f.Start()
	}
	return next, nil
}

// FleetOf is d's fleet decider; nil for a local pool. Its WakeLeader and
// Members are safe from any goroutine.
func FleetOf(d Decider) *Fleet {
	f, _ := d.(*Fleet)
	return f
}

// LocalBounds is the pool as this host runs it: a fleet pool's bounds are
// 0..capacity here (the fleet's min_workers and max_workers are the
// leader's), anything else as configured.
func LocalBounds(cfg *config.Pool) *config.Pool {
	if !cfg.Joins() {
		return cfg
	}
	local := *cfg
	local.MinWorkers = 0
	local.MaxWorkers = min(cfg.MaxWorkers, fleetCapacity(cfg))
	return &local
}

func monoTime(d time.Duration) time.Time { return time.Unix(0, 0).Add(d) }

func monoSince(t time.Time) time.Duration { return t.Sub(time.Unix(0, 0)) }
