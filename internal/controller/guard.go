package controller

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/hostload"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// HostGuard is the host guard of issue 9, one per daemon and shared by all
// its pools: the host is read at most once per sample interval, whichever
// pool's tick comes first, and every pool is judged against the same
// readings. It also remembers each pool's load, so that an emergency takes
// its worker from the right pool (policy.VictimPool), and when the last
// emergency scale-down was, so that there is one per cooldown across all
// pools. Without a [host_guard] table it judges nothing, but still reads
// the host for rules that use host signals.
type HostGuard struct {
	log  *eventlog.Logger
	read func() hostload.Reading

	mu            sync.Mutex
	cfg           *config.HostGuard
	ema           policy.EWMA
	host          policy.HostState
	sampledAt     time.Time
	pools         map[string]policy.PoolLoad
	lastEmergency time.Time
	said          map[string]bool // read failures already logged, by part
}

// NewHostGuard makes the daemon's guard. read samples the host (nil: the
// real /proc through hostload).
func NewHostGuard(cfg *config.HostGuard, log *eventlog.Logger, read func() hostload.Reading) *HostGuard {
	g := &HostGuard{log: log, read: read, cfg: cfg, pools: map[string]policy.PoolLoad{}, said: map[string]bool{}}
	if g.read == nil {
		r, err := hostload.New("/proc")
		if err != nil {
			log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "host guard cannot read /proc, so it judges nothing: %v", err)
			g.read = func() hostload.Reading { return hostload.Reading{CPUErr: err, PSIErr: err, MemErr: err} }
		} else {
			g.read = r.Read
		}
	}
	return g
}

// SetConfig applies a reloaded [host_guard] (nil: none).
func (g *HostGuard) SetConfig(cfg *config.HostGuard) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cfg = cfg
}

// forget drops a pool that is gone from the victims' list.
func (g *HostGuard) forget(pool string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pools, pool)
}

// guardCheck is the guard's view at one pool tick.
type guardCheck struct {
	host    policy.HostState
	verdict policy.Verdict
	active  bool // a [host_guard] is configured
	victim  bool // this pool gives up the next emergency worker
	due     bool // the emergency cooldown is over
}

// check records the pool's load and returns the guard's judgement at now,
// reading the host first if the last reading is half an interval old.
// wantHost says that the pool's rules read host signals.
func (g *HostGuard) check(now time.Time, load policy.PoolLoad, wantHost bool, poll time.Duration) guardCheck {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pools[load.Name] = load
	if g.cfg == nil && !wantHost {
		return guardCheck{}
	}
	interval := poll
	params := policy.DefaultGuardParams()
	if g.cfg != nil {
		interval, params = g.cfg.SampleInterval, g.cfg.GuardParams
	}
	if g.sampledAt.IsZero() || now.Sub(g.sampledAt) >= interval/2 {
		g.sample(now, params)
	}
	c := guardCheck{host: g.host, active: g.cfg != nil}
	if !c.active {
		return c
	}
	c.verdict = policy.Judge(params, g.host)
	if c.verdict.Emergency {
		loads := make([]policy.PoolLoad, 0, len(g.pools))
		for _, l := range g.pools {
			loads = append(loads, l)
		}
		victim, ok := policy.VictimPool(loads)
		c.victim = ok && victim == load.Name
		c.due = policy.EmergencyDue(now, g.lastEmergency, params.EmergencyCooldown)
	}
	return c
}

func (g *HostGuard) sample(now time.Time, params policy.GuardParams) {
	r := g.read()
	g.sampledAt = now
	g.host.Reading = r.HostReading
	if r.CPUKnown {
		g.host.EMA = g.ema.Update(r.CPU, params.AlphaUp, params.AlphaDown)
	}
	for part, err := range map[string]error{"cpu": r.CPUErr, "psi": r.PSIErr, "memory": r.MemErr} {
		if err == nil || g.said[part] {
			continue
		}
		g.said[part] = true
		what := map[string]string{
			"cpu":    "host CPU is unknown, so the CPU guard judges nothing",
			"psi":    "the kernel has no pressure stall information (PSI; boot with psi=1 on kernels built with CONFIG_PSI_DEFAULT_DISABLED), so the psi_* guards and signals are off",
			"memory": "MemAvailable is unknown, so the memory guard judges nothing",
		}[part]
		g.log.Event(eventlog.Lifecycle, eventlog.Warning, eventlog.Fields{"FLEXIQ_ERROR": err.Error()}, "host guard: %s: %v", what, err)
	}
}

// forced records an emergency scale-down at now: the next waits out the
// cooldown, whichever pool it falls to.
func (g *HostGuard) forced(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lastEmergency = now
}

// scaling is a pool's part in issue 9's policies: its compiled rules, its
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
func (p *Pool) setRules(cfg *config.Pool) error {
	sc := &p.sc
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
func (p *Pool) decide(now time.Time, params policy.Params, obs policy.Observation, counts source.Counts, prom map[string]policy.PromResult) policy.Decision {
	sc := &p.sc
	var chk guardCheck
	if p.opts.Guard != nil {
		load := policy.PoolLoad{Name: p.name, Priority: p.cfg.Scaling.Priority, Live: obs.Current, Min: p.cfg.MinWorkers}
		if p.dryRun() || p.override.Active(p.wallNow()) {
			// A pool the operator holds (pause, pin) or that only logs
			// (dry-run) cannot give up a worker: an emergency must fall to
			// a pool that can, not be spent on one that will not act.
			load.Min = load.Live
		}
		chk = p.opts.Guard.check(now, load, sc.rules != nil && sc.rules.ReadsHost(), p.cfg.PollInterval)
	}

	var read map[string]policy.PromResult
	if sc.rules != nil {
		if qs := sc.rules.Queries(); len(qs) > 0 && obs.Valid {
			read = conditionsRead(qs, prom)
		}
	}
	// The rules' variables are read only by the rules, and only on a
	// valid observation (which carries the counts' oldest age).
	in := policy.NewInput(now, params, obs, counts.Paused, p.workers.draining(), chk.host, read)
	if chk.active {
		in.Guard = &policy.GuardInput{Verdict: chk.verdict, Victim: chk.victim, Due: chk.due}
	}
	r := p.pipeline().Decide(in)
	if sc.rules != nil {
		d := r.Strategy
		if err := sc.rules.Err; err != nil {
			if log, suppressed := sc.ruleErr.Fail(now); log {
				p.log.Event(eventlog.RuleError, eventlog.Warning, eventlog.Fields{"FLEXIQ_RULE": d.Rule, "FLEXIQ_ERROR": err.Error()},
					"%v: holding at %d workers (%d more failures since the last report)", err, d.Current, suppressed)
			}
		} else if obs.Valid && sc.ruleErr.OK() {
			p.log.Event(eventlog.RuleError, eventlog.Notice, nil, "rules evaluate again")
		}
	}
	if chk.active {
		p.logGuard(r.Asked, r.Decision, chk)
	}
	return r.Decision
}

// pipeline is the pool's decision pipeline (policy.Pipeline, shared with
// simulate): its memory is the pool's, its strategy, behaviour and rules
// those of the configuration in force.
func (p *Pool) pipeline() *policy.Pipeline {
	pl := p.pipe
	pl.Strategy, pl.Behavior, pl.Rules = p.cfg.Scaling.Policy, p.cfg.Scaling.Behavior, p.sc.rules
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

// acted records what the tick did, for the rate limits, the rules'
// cooldowns and the guard's emergency cooldown.
func (p *Pool) acted(now time.Time, d policy.Decision) {
	if p.pipeline().Acted(now, d) && p.opts.Guard != nil {
		p.opts.Guard.forced(now)
	}
}

// logGuard writes one entry per new thing the guard did to this pool: a
// block of a new target, or an emergency scale-down, with the readings.
func (p *Pool) logGuard(asked, d policy.Decision, chk guardCheck) {
	sc := &p.sc
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
		p.log.Event(eventlog.HostGuardEmergency, eventlog.Warning, f,
			"host guard emergency: draining one worker, %d -> %d (%s; %s)", d.Current, d.Desired, f["FLEXIQ_REASON"], h)
		return
	}
	p.log.Event(eventlog.HostGuardBlocked, eventlog.Notice, f,
		"host guard holds scale-up %d -> %d at %d (%s; %s)", asked.Current, asked.Desired, d.Desired, f["FLEXIQ_REASON"], h)
}

// savedScaling is the part of the state file (state.go) that the rate
// limits and the rules need across a restart of the daemon.
type savedScaling struct {
	Events    []savedEvent     `json:"scale_events,omitempty"`
	RuleFired map[string]int64 `json:"rule_fired_mono_ns,omitempty"`
	LastBusy  int64            `json:"last_busy_mono_ns,omitempty"`
}

type savedEvent struct {
	At     int64 `json:"at_mono_ns"`
	Change int   `json:"change"`
}

func (p *Pool) saveScaling() savedScaling {
	var s savedScaling
	for _, e := range p.pipe.Limiter.Events() {
		s.Events = append(s.Events, savedEvent{At: int64(monoSince(e.At)), Change: e.Change})
	}
	if rs := p.sc.rules; rs != nil {
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

func (p *Pool) restoreScaling(now time.Time, s savedScaling) {
	events := make([]policy.ScaleEvent, 0, len(s.Events))
	for _, e := range s.Events {
		events = append(events, policy.ScaleEvent{At: monoTime(time.Duration(e.At)), Change: e.Change})
	}
	p.pipe.Limiter.Restore(now, events)
	if rs := p.sc.rules; rs != nil {
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

// scalingLongest is how long the rate limits and rules remember, so that a
// state file is not thrown away while a cooldown it carries still runs.
func (p *Pool) scalingLongest() time.Duration {
	d := p.cfg.Scaling.Behavior.Longest()
	for _, r := range p.cfg.Scaling.ScaleUp {
		d = max(d, r.Cooldown)
	}
	if r := p.cfg.Scaling.ScaleDown; r != nil {
		d = max(d, r.Cooldown)
	}
	return d
}
