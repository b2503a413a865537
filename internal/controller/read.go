package controller

// The source's reads of a tick: the queue's counts, and with them what the
// pool's settings ask of the same source (flexiq's threads per worker, the
// Little's law inputs, the rules' promql() conditions). Any of them may hang
// for as long as its timeout, so they run on values handed to them and
// touch nothing of the pool: the loop runs them in a goroutine and serves
// the operator meanwhile (loop.go).

import (
	"context"
	"errors"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// sourcePlan is what a tick's reads need, taken from the pool by its owner.
type sourcePlan struct {
	src source.Source
	cfg *config.Pool
	// readsDemand is set for a pool with demand = "littles-law", over
	// demandWindow.
	readsDemand  bool
	demandWindow time.Duration
	// queries are the rules' promql() conditions, asked when the queue's
	// counts were read, of querier (promql.go).
	queries []string
	querier source.Querier
}

// observed is what a tick's reads found.
type observed struct {
	counts  source.Counts
	err     error
	threads threadsRead
	demand  demandRead
	prom    map[string]policy.PromResult // nil when not asked
}

// threadsRead is one read of flexiq's live workers' threads; asked is false
// when the pool does not read them.
type threadsRead struct {
	asked bool
	n     int
	found bool
	err   error
}

// demandRead is one read of the Little's law inputs; asked is false when
// the pool does not read them, or the queue's counts failed.
type demandRead struct {
	asked bool
	d     source.Demand
	err   error
}

// readPlan hands the tick's reads what they need; the owner calls it.
func (p *Pool) readPlan() sourcePlan {
	plan := sourcePlan{src: p.src, cfg: p.cfg}
	if params := p.cfg.PolicyParams(); params.Demand == policy.DemandLittlesLaw {
		plan.readsDemand, plan.demandWindow = true, params.DemandWindow
	}
	if p.sc.rules != nil {
		plan.queries = p.sc.rules.Queries()
		plan.querier = p.querier()
	}
	return plan
}

// tickReader is the tick's read of the source; owner only. A fleet pool's
// tick reads nothing: the fleet's leader reads the queue, once for the
// fleet, in its coordinator (fleetlink.go).
func (p *Pool) tickReader() func(context.Context) observed {
	if p.fl != nil {
		return func(context.Context) observed { return observed{} }
	}
	return p.readPlan().read
}

// sourceTimeout bounds one of a tick's reads by its interval, so that a
// slow database delays this pool only.
func sourceTimeout(cfg *config.Pool) time.Duration {
	return min(max(cfg.PollInterval, time.Second), 30*time.Second)
}

// read runs the tick's reads. Sources stamp ages and due times with the
// wall clock, as the queue does; the controller's own clock is monotonic.
func (pl sourcePlan) read(ctx context.Context) observed {
	var o observed
	sctx, cancel := context.WithTimeout(ctx, sourceTimeout(pl.cfg))
	o.counts, o.err = pl.src.Observe(sctx, time.Now())
	cancel()
	o.threads = pl.readThreads(ctx)
	if o.err != nil {
		return o
	}
	o.demand = pl.readDemand(ctx)
	if len(pl.queries) > 0 {
		o.prom = pl.conditions(ctx)
	}
	return o
}

// readThreads reads flexiq's live workers' threads, with
// threads_per_worker = "auto" and a source that reports them.
func (pl sourcePlan) readThreads(ctx context.Context) threadsRead {
	tr, ok := source.As[source.ThreadsReporter](pl.src)
	if !ok || !pl.cfg.ThreadsAuto {
		return threadsRead{}
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, found, err := tr.Threads(sctx, time.Now())
	return threadsRead{asked: true, n: n, found: found, err: err}
}

// readDemand reads the arrival rate and the mean service time over
// demand_window_sec, for a pool with demand = "littles-law" whose source
// can read them (the config check refuses the knob for the others).
func (pl sourcePlan) readDemand(ctx context.Context) demandRead {
	dr, ok := source.As[source.DemandReader](pl.src)
	if !pl.readsDemand || !ok {
		return demandRead{}
	}
	dctx, cancel := context.WithTimeout(ctx, sourceTimeout(pl.cfg))
	defer cancel()
	// Sources stamp jobs with the wall clock, as the queue does.
	d, err := dr.Demand(dctx, time.Now(), pl.demandWindow)
	return demandRead{asked: true, d: d, err: err}
}

// conditions runs the rules' promql() queries against the pool's source,
// or the daemon's [prometheus] (promql.go).
func (pl sourcePlan) conditions(ctx context.Context) map[string]policy.PromResult {
	out := make(map[string]policy.PromResult, len(pl.queries))
	q := pl.querier
	if q == nil {
		for _, s := range pl.queries {
			out[s] = policy.PromResult{Err: errors.New("no Prometheus server runs promql(): the pool's source is not prometheus and there is no [prometheus]")}
		}
		return out
	}
	qctx, cancel := context.WithTimeout(ctx, sourceTimeout(pl.cfg))
	defer cancel()
	for s, r := range q.Conditions(qctx, pl.queries) {
		out[s] = policy.PromResult{Fires: r.Fires, Err: r.Err}
	}
	return out
}
