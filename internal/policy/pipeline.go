package policy

import "time"

// The decision pipeline, written once for the daemon (controller) and the
// replay (simulate) alike, so that the two cannot drift: a strategy chosen
// by name (the HPA formula or the trigger rules), then the rate limits and
// cooldowns, then the host guard. What the pipeline needs from the world
// (the host guard's verdict, the rules' promql() results, the signals) is
// read by the caller and passed in as data; the pipeline does no I/O.
// Overrides (pause, pin) and dry-run stay with the daemon: the replay has
// no operator.

// Strategy names, as the configuration spells them (scaling.policy).
const (
	StrategyHPA   = "hpa"
	StrategyRules = "rules"
)

// Strategy is one way to turn a tick's observation into a decision.
type Strategy func(pl *Pipeline, in *Input) Decision

// strategies is the registry, by name. A name it does not know, or the
// rules strategy with no rules compiled, falls back to the HPA formula, the
// default policy: the daemon always decides something.
var strategies = map[string]Strategy{
	StrategyHPA: func(pl *Pipeline, in *Input) Decision {
		return pl.Rec.Decide(in.Now, in.Params, in.Obs)
	},
	StrategyRules: func(pl *Pipeline, in *Input) Decision {
		if pl.Rules == nil {
			return pl.Rec.Decide(in.Now, in.Params, in.Obs)
		}
		return pl.Rules.Decide(in.Now, in.Params, in.Obs, in.Signals, in.Prom)
	},
}

// Pipeline is one pool's decision: the state its steps keep between ticks
// (held by pointer, so that the caller keeps owning it across reloads) and
// the strategy's name.
type Pipeline struct {
	Strategy string
	Rec      *Recommender // the HPA formula's history
	Rules    *RuleSet     // compiled rules; nil unless Strategy is "rules"
	Limiter  *Limiter
	Behavior Behavior
}

// NewPipeline is a pool's pipeline with state of its own: a new recommender
// and limiter. rules are the rules strategy's (CompileRules; nil for the
// others); a second pipeline over the same rules takes rules.Fresh(), which
// shares their compiled programs but not their memory.
func NewPipeline(strategy string, b Behavior, rules *RuleSet) *Pipeline {
	return &Pipeline{Strategy: strategy, Rec: &Recommender{}, Rules: rules, Limiter: &Limiter{}, Behavior: b}
}

// GuardInput is the host guard's judgement for this pool at this tick.
type GuardInput struct {
	Verdict Verdict
	Victim  bool // this pool gives up the next emergency worker
	Due     bool // the emergency cooldown is over
}

// Input is one tick's data.
type Input struct {
	Now     time.Time
	Params  Params
	Obs     Observation
	Signals Signals               // the rules' variables
	Prom    map[string]PromResult // the rules' promql() results
	Guard   *GuardInput           // nil: no [host_guard]
}

// NewInput is one tick's input: the observation, and the rules' variables
// read from it and from what only the caller knows (the paused jobs, the
// draining workers, the host as the guard saw it). prom is the rules'
// promql() results; the guard, when there is one, the caller's to set.
func NewInput(now time.Time, params Params, obs Observation, paused int64, draining int, host HostState, prom map[string]PromResult) Input {
	return Input{
		Now: now, Params: params, Obs: obs, Prom: prom,
		Signals: Signals{
			Paused: paused, OldestAge: obs.OldestAge.Seconds(), OldestKnown: obs.OldestKnown,
			Workers: obs.Current, Draining: draining, WorkerCPU: obs.CPU, WorkerCPUKnown: obs.CPUKnown,
			Host: host.Reading, HostCPUEMA: host.EMA,
		},
	}
}

// Result is the pipeline's decision and the decision each step was given,
// for the caller's logs (a rule's error, a guard entry with what was asked).
type Result struct {
	Decision Decision
	Strategy Decision // the strategy's decision, before the rate limits
	Asked    Decision // before the host guard
}

// Decide runs the pipeline once. The steps the decision went through are
// in its fields (Rule, Limit, Guard), which explain turns into steps.
func (pl *Pipeline) Decide(in Input) Result {
	strat, ok := strategies[pl.Strategy]
	if !ok {
		strat = strategies[StrategyHPA]
	}
	var r Result
	d := strat(pl, &in)
	r.Strategy = d
	d, d.Limit = pl.Limiter.Limit(in.Now, pl.Behavior, in.Params, d)
	r.Asked = d
	if g := in.Guard; g != nil {
		d, d.Guard = ApplyGuard(d, in.Params, g.Verdict, g.Victim, g.Due)
	}
	r.Decision = d
	return r
}

// Acted records what the tick did with d, for the rate limits and the
// rules' cooldowns. It says whether the pool moved on the guard's
// emergency, which starts the emergency cooldown (the caller's clock: it is
// the host's, shared by its pools).
func (pl *Pipeline) Acted(now time.Time, d Decision) (forced bool) {
	moved := (d.Action == ScaleUp || d.Action == ScaleDown) && d.Desired != d.Current
	if moved {
		pl.Limiter.Record(now, pl.Behavior, d.Current, d.Desired)
	} else {
		pl.Limiter.Record(now, pl.Behavior, 0, 0)
	}
	if moved && pl.Rules != nil {
		pl.Rules.Acted(d)
	}
	return moved && d.Guard == GuardForced
}
