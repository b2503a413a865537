package decide

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// sourceLogRate is how often a failure that repeats at every tick is
// logged again.
const sourceLogRate = time.Minute

// Options are a decider's ties to the daemon.
type Options struct {
	// Log is the pool's journal.
	Log *eventlog.Logger
	// Guard is the daemon's host guard, shared by its pools; nil is none.
	Guard *HostGuard
	// NewPromQL opens the daemon's [prometheus] for the rules' promql()
	// (promql.go); nil is source.NewPromQL.
	NewPromQL func(config.Prometheus) source.PromQL
	// OpenFleetStore opens a fleet pool's coordination store; nil is the
	// real Redis or PostgreSQL store the URL names.
	OpenFleetStore func(config.Fleet) (fleet.Store, error)
}

// Local is the decision of a pool on its own: the source's read, the
// pool's pipeline (policy.Pipeline, shared with simulate), its rules, the
// daemon's host guard. Its memory (the recommender's history, the
// limiter's events, the rules' cooldowns) is kept across ticks and
// reloads, and across a restart through the state file.
type Local struct {
	pool Pool
	log  *eventlog.Logger
	opts Options
	// cfg is the pool as this host runs it (LocalBounds).
	cfg  *config.Pool
	sc   scaling // rules, rate limits, the host guard
	pipe *policy.Pipeline
	// prom runs the rules' promql() when the source does not (promql.go).
	prom   source.PromQL
	demand demandState
}

// newLocal prepares the local pipeline of cfg's pool, as configured.
func newLocal(cfg *config.Pool, pool Pool, o Options) (*Local, error) {
	l := &Local{
		pool: pool, log: o.Log, opts: o, cfg: LocalBounds(cfg),
		prom: openPromQL(o.NewPromQL, cfg),
		pipe: policy.NewPipeline(cfg.Scaling.Policy, cfg.Scaling.Behavior, nil),
	}
	if err := l.setRules(cfg); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Close releases the daemon's [prometheus] connection, if the pool had
// one.
func (l *Local) Close() {
	if l.prom != nil {
		l.prom.Close()
	}
}

// Configure takes in a reloaded configuration: a changed [prometheus] is
// reopened.
func (l *Local) Configure(cfg *config.Pool) {
	l.updatePromQL(cfg)
	l.cfg = LocalBounds(cfg)
}

// Memory is the local pipeline itself.
func (l *Local) Memory() *Local { return l }

// Recommender is the pipeline's history of recommendations, which the
// state file keeps.
func (l *Local) Recommender() *policy.Recommender { return l.pipe.Rec }

// Reader is the tick's read of the pool's own source.
func (l *Local) Reader(src source.Source) func(context.Context) Observed {
	return l.plan(src).read
}

// Ticked, Start, Stop, Leave: a local pool has no coordinator.
func (l *Local) Ticked(source.Source)  {}
func (l *Local) Start()                {}
func (l *Local) Stop(string)           {}
func (l *Local) Leave(context.Context) {}
func (l *Local) View() *api.FleetView  { return nil }
func (l *Local) Summary() string       { return "" }

// Decide is the decision of a pool on its own: the source's read, the
// pool's pipeline.
func (l *Local) Decide(now, _ time.Time, read Observed) Tick {
	obs := policy.Observation{Current: l.pool.Live()}
	counts, srcErr := l.pool.Observed(now, read)
	params := l.cfg.PolicyParams()
	params.ThreadsPerWorker = l.pool.Threads(read.Threads)
	if srcErr == nil {
		obs.Valid, obs.Pending = true, counts.Pending
		obs.OldestAge, obs.OldestKnown = counts.OldestAge, counts.HasOldest
		obs.Running = RunningOnLive(counts.Running, l.pool.Draining(), params.ThreadsPerWorker)
	}
	obs.CPU, obs.CPUKnown = l.pool.MeanUtil()
	if srcErr == nil {
		l.observeDemand(read.Demand, &obs)
	}
	d := l.decide(now, params, obs, counts, read.Prom)
	return Tick{D: d, E: Explain(l.pool.Wall(), d, params, obs, counts, srcErr), Obs: obs, Counts: counts, SrcErr: srcErr}
}

// RunningOnLive is R as the policy means it: the jobs running on the live
// workers. The queue also counts the jobs that draining workers are
// finishing; counted against the live workers alone, they would look like an
// overload right after every scale-down and undo it at once. A draining
// worker holds at most threads_per_worker of them.
func RunningOnLive(running int64, draining, threadsPerWorker int) int64 {
	return max(0, running-int64(draining*threadsPerWorker))
}

// rate-limit history, and what it last logged of the guard and its rules.
type scaling struct {
	rules    *policy.RuleSet // nil unless policy = "rules"
	rulesFor []policy.Rule   // the rules compiled, to tell a reload that changed them
	downFor  *policy.Rule

	guardLogged string // key of the last guard entry: log each new one once
	ruleErr     *eventlog.Throttle
}

// setRules compiles the pool's rules when they changed. The config package
// compiled them at load already, so an error here is a bug; the pool then
// holds on every tick, saying why.
func (l *Local) setRules(cfg *config.Pool) error {
	sc := &l.sc
	if sc.ruleErr == nil {
		sc.ruleErr = eventlog.NewThrottle(sourceLogRate)
	}
	if cfg.Scaling.Policy != config.PolicyRules {
		sc.rules, sc.rulesFor, sc.downFor = nil, nil, nil
		return nil
	}
	if sc.rules != nil && rulesEqual(sc.rulesFor, cfg.Scaling.ScaleUp) && ruleEqual(sc.downFor, cfg.Scaling.ScaleDown) {
		return nil
	}
	rs, err := policy.CompileRules(cfg.Scaling.ScaleUp, cfg.Scaling.ScaleDown)
	if err != nil {
		return fmt.Errorf("pool %s: %w", cfg.Name, err)
	}
	if sc.rules != nil {
		// A rule's cooldown and the idle clock carry over a reload that
		// changed other rules: they are about the pool, not the text.
		rs.LastBusy = sc.rules.LastBusy
		for k, t := range sc.rules.LastFired {
			rs.LastFired[k] = t
		}
	}
	sc.rules, sc.rulesFor, sc.downFor = rs, cfg.Scaling.ScaleUp, cfg.Scaling.ScaleDown
	return nil
}

func rulesEqual(a, b []policy.Rule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func ruleEqual(a, b *policy.Rule) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// decide is the tick's decision: the pool's policy (hpa or rules), then its
// rate limits and cooldowns, then the host guard, through policy.Pipeline.
// What the steps read from the world (the guard's readings, the rules'
// promql() results) is read here and passed in as data.
func (l *Local) decide(now time.Time, params policy.Params, obs policy.Observation, counts source.Counts, prom map[string]policy.PromResult) policy.Decision {
	sc := &l.sc
	var chk guardCheck
	if l.opts.Guard != nil {
		load := policy.PoolLoad{Name: l.cfg.Name, Priority: l.cfg.Scaling.Priority, Live: obs.Current, Min: l.cfg.MinWorkers}
		if l.pool.Holds() {
			// A pool the operator holds (pause, pin) or that only logs
			// (dry-run) cannot give up a worker: an emergency must fall to
			// a pool that can, not be spent on one that will not act.
			load.Min = load.Live
		}
		chk = l.opts.Guard.check(now, load, sc.rules != nil && sc.rules.ReadsHost(), l.cfg.PollInterval)
	}

	var read map[string]policy.PromResult
	if sc.rules != nil {
		if qs := sc.rules.Queries(); len(qs) > 0 && obs.Valid {
			read = conditionsRead(qs, prom)
		}
	}
	// The rules' variables are read only by the rules, and only on a
	// valid observation (which carries the counts' oldest age).
	in := policy.NewInput(now, params, obs, counts.Paused, l.pool.Draining(), chk.host, read)
	if chk.active {
		in.Guard = &policy.GuardInput{Verdict: chk.verdict, Victim: chk.victim, Due: chk.due}
	}
	r := l.pipeline().Decide(in)
	if sc.rules != nil {
		d := r.Strategy
		if err := sc.rules.Err; err != nil {
			if log, suppressed := sc.ruleErr.Fail(now); log {
				l.log.Event(eventlog.RuleError, eventlog.Warning, eventlog.Fields{"FLEXIQ_RULE": d.Rule, "FLEXIQ_ERROR": err.Error()},
					"%v: holding at %d workers (%d more failures since the last report)", err, d.Current, suppressed)
			}
		} else if obs.Valid && sc.ruleErr.OK() {
			l.log.Event(eventlog.RuleError, eventlog.Notice, nil, "rules evaluate again")
		}
	}
	if chk.active {
		l.logGuard(r.Asked, r.Decision, chk)
	}
	return r.Decision
}

// pipeline is the pool's decision pipeline (policy.Pipeline, shared with
// simulate): its memory is the pool's, its strategy, behaviour and rules
// those of the configuration in force.
func (l *Local) pipeline() *policy.Pipeline {
	pl := l.pipe
	pl.Strategy, pl.Behavior, pl.Rules = l.cfg.Scaling.Policy, l.cfg.Scaling.Behavior, l.sc.rules
	return pl
}

// conditionsRead is the tick's promql() results for queries: a query that
// a reload added after the tick's read began was not asked this tick.
func conditionsRead(queries []string, read map[string]policy.PromResult) map[string]policy.PromResult {
	out := make(map[string]policy.PromResult, len(queries))
	for _, q := range queries {
		r, ok := read[q]
		if !ok {
			r.Err = errors.New("not asked this tick: the rules changed while the source was read")
		}
		out[q] = r
	}
	return out
}

// Acted records what the tick did, for the rate limits, the rules'
// cooldowns and the guard's emergency cooldown.
func (l *Local) Acted(now time.Time, d policy.Decision) {
	if l.pipeline().Acted(now, d) && l.opts.Guard != nil {
		l.opts.Guard.forced(now)
	}
}

// logGuard writes one entry per new thing the guard did to this pool: a
// block of a new target, or an emergency scale-down, with the readings.
func (l *Local) logGuard(asked, d policy.Decision, chk guardCheck) {
	sc := &l.sc
	if d.Guard == policy.GuardNone {
		sc.guardLogged = ""
		return
	}
	key := fmt.Sprintf("%s %d->%d", d.Guard, asked.Current, asked.Desired)
	if d.Guard == policy.GuardBlocked && key == sc.guardLogged {
		return
	}
	sc.guardLogged = key
	h := chk.host
	f := eventlog.Fields{
		"FLEXIQ_CURRENT": strconv.Itoa(d.Current),
		"FLEXIQ_DESIRED": strconv.Itoa(d.Desired),
		"FLEXIQ_ASKED":   strconv.Itoa(asked.Desired),
		"FLEXIQ_REASON":  strings.Join(chk.verdict.Reasons, ", "),
	}
	if h.Reading.CPUKnown {
		f["FLEXIQ_HOST_CPU"] = strconv.FormatFloat(h.Reading.CPU, 'f', 3, 64)
		f["FLEXIQ_HOST_CPU_EMA"] = strconv.FormatFloat(h.EMA, 'f', 3, 64)
	}
	if h.Reading.PSIKnown {
		f["FLEXIQ_PSI_CPU"] = strconv.FormatFloat(h.Reading.PSICPU, 'f', 2, 64)
		f["FLEXIQ_PSI_MEMORY"] = strconv.FormatFloat(h.Reading.PSIMemory, 'f', 2, 64)
	}
	if h.Reading.MemKnown {
		f["FLEXIQ_MEM_AVAILABLE"] = strconv.FormatUint(h.Reading.MemAvailable, 10)
	}
	if d.Guard == policy.GuardForced {
		l.log.Event(eventlog.HostGuardEmergency, eventlog.Warning, f,
			"host guard emergency: draining one worker, %d -> %d (%s; %s)", d.Current, d.Desired, f["FLEXIQ_REASON"], h)
		return
	}
	l.log.Event(eventlog.HostGuardBlocked, eventlog.Notice, f,
		"host guard holds scale-up %d -> %d at %d (%s; %s)", asked.Current, asked.Desired, d.Desired, f["FLEXIQ_REASON"], h)
}

// SavedScaling is the part of the state file (state.go) that the rate
// limits and the rules need across a restart of the daemon.
type SavedScaling struct {
	Events    []savedEvent     `json:"scale_events,omitempty"`
	RuleFired map[string]int64 `json:"rule_fired_mono_ns,omitempty"`
	LastBusy  int64            `json:"last_busy_mono_ns,omitempty"`
}

type savedEvent struct {
	At     int64 `json:"at_mono_ns"`
	Change int   `json:"change"`
}

// SaveScaling is what the state file keeps of the rate limits and rules.
func (l *Local) SaveScaling() SavedScaling {
	var s SavedScaling
	for _, e := range l.pipe.Limiter.Events() {
		s.Events = append(s.Events, savedEvent{At: int64(monoSince(e.At)), Change: e.Change})
	}
	if rs := l.sc.rules; rs != nil {
		for k, t := range rs.LastFired {
			if s.RuleFired == nil {
				s.RuleFired = map[string]int64{}
			}
			s.RuleFired[k] = int64(monoSince(t))
		}
		if !rs.LastBusy.IsZero() {
			s.LastBusy = int64(monoSince(rs.LastBusy))
		}
	}
	return s
}

// RestoreScaling takes the rate limits and rules back from a state file.
func (l *Local) RestoreScaling(now time.Time, s SavedScaling) {
	events := make([]policy.ScaleEvent, 0, len(s.Events))
	for _, e := range s.Events {
		events = append(events, policy.ScaleEvent{At: monoTime(time.Duration(e.At)), Change: e.Change})
	}
	l.pipe.Limiter.Restore(now, events)
	if rs := l.sc.rules; rs != nil {
		for k, at := range s.RuleFired {
			if t := monoTime(time.Duration(at)); !t.After(now) {
				rs.LastFired[k] = t
			}
		}
		if t := monoTime(time.Duration(s.LastBusy)); s.LastBusy > 0 && !t.After(now) {
			rs.LastBusy = t
		}
	}
}

// ScalingLongest is how long the rate limits and rules remember, so that a
// state file is not thrown away while a cooldown it carries still runs.
func (l *Local) ScalingLongest() time.Duration {
	d := l.cfg.Scaling.Behavior.Longest()
	for _, r := range l.cfg.Scaling.ScaleUp {
		d = max(d, r.Cooldown)
	}
	if r := l.cfg.Scaling.ScaleDown; r != nil {
		d = max(d, r.Cooldown)
	}
	return d
}
