package decide

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

// Observed is what a tick's reads found.
type Observed struct {
	Counts  source.Counts
	Err     error
	Threads ThreadsRead
	Demand  DemandRead
	Prom    map[string]policy.PromResult // nil when not asked
}

// ThreadsRead is one read of flexiq's live workers' threads; Asked is false
// when the pool does not read them.
type ThreadsRead struct {
	Asked bool
	N     int
	Found bool
	Err   error
}

// DemandRead is one read of the Little's law inputs; Asked is false when
// the pool does not read them, or the queue's counts failed.
type DemandRead struct {
	Asked bool
	D     source.Demand
	Err   error
}

// plan hands the tick's reads what they need; the owner calls it.
func (l *Local) plan(src source.Source) sourcePlan {
	plan := sourcePlan{src: src, cfg: l.cfg}
	if params := l.cfg.PolicyParams(); params.Demand == policy.DemandLittlesLaw {
		plan.readsDemand, plan.demandWindow = true, params.DemandWindow
	}
	if l.sc.rules != nil {
		plan.queries = l.sc.rules.Queries()
		plan.querier = l.querier(src)
	}
	return plan
}

// sourceTimeout bounds one of a tick's reads by its interval, so that a
// slow database delays this pool only.
func sourceTimeout(cfg *config.Pool) time.Duration {
	return min(max(cfg.PollInterval, time.Second), 30*time.Second)
}

// read runs the tick's reads. Sources stamp ages and due times with the
// wall clock, as the queue does; the controller's own clock is monotonic.
func (pl sourcePlan) read(ctx context.Context) Observed {
	var o Observed
	sctx, cancel := context.WithTimeout(ctx, sourceTimeout(pl.cfg))
	o.Counts, o.Err = pl.src.Observe(sctx, time.Now())
	cancel()
	o.Threads = pl.readThreads(ctx)
	if o.Err != nil {
		return o
	}
	o.Demand = pl.readDemand(ctx)
	if len(pl.queries) > 0 {
		o.Prom = pl.conditions(ctx)
	}
	return o
}

// readThreads reads flexiq's live workers' threads, with
// threads_per_worker = "auto" and a source that reports them.
func (pl sourcePlan) readThreads(ctx context.Context) ThreadsRead {
	tr, ok := source.As[source.ThreadsReporter](pl.src)
	if !ok || !pl.cfg.ThreadsAuto {
		return ThreadsRead{}
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, found, err := tr.Threads(sctx, time.Now())
	return ThreadsRead{Asked: true, N: n, Found: found, Err: err}
}

// readDemand reads the arrival rate and the mean service time over
// demand_window_sec, for a pool with demand = "littles-law" whose source
// can read them (the config check refuses the knob for the others).
func (pl sourcePlan) readDemand(ctx context.Context) DemandRead {
	dr, ok := source.As[source.DemandReader](pl.src)
	if !pl.readsDemand || !ok {
		return DemandRead{}
	}
	dctx, cancel := context.WithTimeout(ctx, sourceTimeout(pl.cfg))
	defer cancel()
	// Sources stamp jobs with the wall clock, as the queue does.
	d, err := dr.Demand(dctx, time.Now(), pl.demandWindow)
	return DemandRead{Asked: true, D: d, Err: err}
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
