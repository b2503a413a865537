package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// Trigger rules (policy = "rules"), the HPC platform's and the n8n
// autoscaler's design: scale-up rules, tried in order, each with its own
// cooldown and step, and one scale-down rule. A rule's `when` is an
// expr-lang expression over the pool's signals and promql("..."). The
// queries are run by the controller before the rules are evaluated and
// come in as results, so that evaluating stays pure.

// Rule is one [[pools.NAME.scale_up]] entry or the [pools.NAME.scale_down]
// table.
type Rule struct {
	When     string
	Cooldown time.Duration // since this rule last acted
	Step     int           // workers added or removed; >= 1
}

// Signals are the named values a rule sees, in addition to promql(). The
// Known flags say which of them this tick has: a rule that reads a signal
// that is not known holds, as a rule over missing data must.
type Signals struct {
	Pending, Running, Paused int64
	OldestAge                float64 // seconds; known with OldestKnown
	OldestKnown              bool
	Workers, Draining        int
	WorkerCPU                float64 // mean utilisation as a fraction of cpu_per_worker
	WorkerCPUKnown           bool
	Host                     HostReading
	HostCPUEMA               float64 // known with Host.CPUKnown
}

// ruleEnv is what an expression is type-checked and run against. The
// field tags are the names rules use.
type ruleEnv struct {
	Pending      int64   `expr:"pending"`
	Running      int64   `expr:"running"`
	Paused       int64   `expr:"paused"`
	OldestAge    float64 `expr:"oldest_age"`
	Workers      int     `expr:"workers"`
	Draining     int     `expr:"draining"`
	WorkerCPU    float64 `expr:"worker_cpu"`
	HostCPU      float64 `expr:"host_cpu"`
	HostCPUEMA   float64 `expr:"host_cpu_ema"`
	PSICPU       float64 `expr:"psi_cpu"`
	PSIMemory    float64 `expr:"psi_memory"`
	MemAvailable int64   `expr:"mem_available"`
	IdleSec      float64 `expr:"idle_sec"`
}

// SignalNames are the names a rule may use, besides promql().
var SignalNames = []string{"pending", "running", "paused", "oldest_age", "workers", "draining", "worker_cpu",
	"host_cpu", "host_cpu_ema", "psi_cpu", "psi_memory", "mem_available", "idle_sec"}

// QueueSignals are the signals read from the pool's queue: a pool without
// one (Params.NoQueue) does not know them.
var QueueSignals = []string{"pending", "running", "paused", "oldest_age", "idle_sec"}

// HostSignals are the signals read from the host rather than the pool.
var HostSignals = []string{"host_cpu", "host_cpu_ema", "psi_cpu", "psi_memory", "mem_available"}

// ExprError is a rule that does not compile, with where in `when` it went
// wrong.
type ExprError struct {
	Line, Column int // 1-based; 0 when the library gave no position
	Msg          string
}

func (e *ExprError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	if e.Line == 1 {
		return fmt.Sprintf("column %d: %s", e.Column, e.Msg)
	}
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

// PromResult is the result of one promql() query at one tick.
type PromResult struct {
	Fires bool  // some sample was non-zero
	Err   error // the query failed: the rule holds
}

// CompiledRule is a rule ready to run, with what it reads.
type CompiledRule struct {
	Rule
	prog    *vm.Program
	Queries []string // promql() arguments, in order of appearance
	Signals []string // signal names it reads

	// mu serialises the runs of prog, which reads the tick's promql()
	// results through results: the program is compiled once and shared
	// by the RuleSets of one pool's configuration (Fresh).
	mu      sync.Mutex
	results *map[string]PromResult
}

// CompileRule parses and type-checks when. Every promql() argument must be
// a string literal, so that the queries are known, and checked, at load.
func CompileRule(r Rule) (*CompiledRule, error) {
	tree, err := parser.Parse(r.When)
	if err != nil {
		return nil, exprError(err, r.When)
	}
	c := &CompiledRule{Rule: r, results: new(map[string]PromResult)}
	var walkErr *ExprError
	ast.Walk(&tree.Node, visitor(func(n *ast.Node) {
		switch v := (*n).(type) {
		case *ast.IdentifierNode:
			if slices.Contains(SignalNames, v.Value) && !slices.Contains(c.Signals, v.Value) {
				c.Signals = append(c.Signals, v.Value)
			}
		case *ast.CallNode:
			id, ok := v.Callee.(*ast.IdentifierNode)
			if !ok || id.Value != "promql" {
				return
			}
			var s *ast.StringNode
			if len(v.Arguments) == 1 {
				s, _ = v.Arguments[0].(*ast.StringNode)
			}
			if s == nil {
				if walkErr == nil {
					walkErr = position(r.When, v.Location().From, `promql() takes one string literal, the query, so that it can be checked at load`)
				}
				return
			}
			if strings.TrimSpace(s.Value) == "" && walkErr == nil {
				walkErr = position(r.When, s.Location().From, "promql(): the query is empty")
			}
			if !slices.Contains(c.Queries, s.Value) {
				c.Queries = append(c.Queries, s.Value)
			}
		}
	}))
	if walkErr != nil {
		return nil, walkErr
	}
	results := c.results
	prog, err := expr.Compile(r.When,
		expr.Env(ruleEnv{}),
		expr.AsBool(),
		expr.Function("promql", func(params ...any) (any, error) {
			q, _ := params[0].(string)
			res, ok := (*results)[q]
			switch {
			case !ok:
				return false, fmt.Errorf("promql(%q): no result", q)
			case res.Err != nil:
				return false, fmt.Errorf("promql(%q): %w", q, res.Err)
			}
			return res.Fires, nil
		}, new(func(string) bool)),
	)
	if err != nil {
		return nil, exprError(err, r.When)
	}
	c.prog = prog
	return c, nil
}

type visitor func(*ast.Node)

func (f visitor) Visit(n *ast.Node) { f(n) }

func exprError(err error, src string) *ExprError {
	var fe *file.Error
	if errors.As(err, &fe) {
		return &ExprError{Line: fe.Line, Column: fe.Column + 1, Msg: fe.Message}
	}
	return &ExprError{Msg: err.Error()}
}

// position is an ExprError at rune offset from in src.
func position(src string, from int, msg string) *ExprError {
	line, col := 1, 1
	for i, r := range []rune(src) {
		if i == from {
			break
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &ExprError{Line: line, Column: col, Msg: msg}
}

// eval runs the rule against env with the tick's query results.
func (c *CompiledRule) eval(env ruleEnv, known func(string) bool, results map[string]PromResult) (bool, error) {
	for _, s := range c.Signals {
		if !known(s) {
			return false, fmt.Errorf("%s is unknown on this tick", s)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.results = results
	defer func() { *c.results = nil }()
	out, err := expr.Run(c.prog, env)
	if err != nil {
		return false, err
	}
	b, _ := out.(bool)
	return b, nil
}

// RuleSet is a pool's compiled rules and what they remember: when each
// last acted, and when the pool last had work (for idle_sec). Not safe for
// concurrent use; one per pool.
type RuleSet struct {
	Up   []*CompiledRule
	Down *CompiledRule // nil: the pool never scales down by rule

	// LastFired is when each rule last acted, by its key ("scale_up[0]",
	// "scale_down"); the controller saves and restores it.
	LastFired map[string]time.Time
	// LastBusy is when the pool last had pending or running work; zero
	// until the first valid observation sets it.
	LastBusy time.Time
	// Err is why the last Decide held on a failing rule; nil otherwise.
	Err error
}

// CompileRules compiles a pool's rules; the error names the failing rule.
func CompileRules(up []Rule, down *Rule) (*RuleSet, error) {
	rs := &RuleSet{LastFired: map[string]time.Time{}}
	for i, r := range up {
		c, err := CompileRule(r)
		if err != nil {
			return nil, fmt.Errorf("scale_up[%d].when: %w", i, err)
		}
		rs.Up = append(rs.Up, c)
	}
	if down != nil {
		c, err := CompileRule(*down)
		if err != nil {
			return nil, fmt.Errorf("scale_down.when: %w", err)
		}
		rs.Down = c
	}
	return rs, nil
}

// Fresh is a RuleSet over the same compiled rules with a memory of its
// own (nothing fired yet, no work seen), for a second pipeline over the
// same configuration (a fleet's leader beside its pool): the rules are
// compiled once.
func (rs *RuleSet) Fresh() *RuleSet {
	return &RuleSet{Up: rs.Up, Down: rs.Down, LastFired: map[string]time.Time{}}
}

// Queries are every promql() query of the set, each once.
func (rs *RuleSet) Queries() []string {
	var qs []string
	for _, c := range append(slices.Clone(rs.Up), rs.Down) {
		if c == nil {
			continue
		}
		for _, q := range c.Queries {
			if !slices.Contains(qs, q) {
				qs = append(qs, q)
			}
		}
	}
	return qs
}

// ReadsHost says whether any rule reads a host signal.
func (rs *RuleSet) ReadsHost() bool {
	for _, c := range append(slices.Clone(rs.Up), rs.Down) {
		if c != nil && slices.ContainsFunc(c.Signals, func(s string) bool { return slices.Contains(HostSignals, s) }) {
			return true
		}
	}
	return false
}

// Decide is the rules policy's decision for the tick at now. The first
// scale-up rule that holds and is out of its cooldown adds its step; if
// none does, the scale-down rule may remove its step. A rule that fails
// (a query error, a signal not known) holds the pool: neither direction
// moves on a tick with a broken rule. Missing queue data holds as in the
// hpa policy; min and max bound the result. d.Rule names the rule that
// acted.
func (rs *RuleSet) Decide(now time.Time, p Params, o Observation, s Signals, results map[string]PromResult) Decision {
	c := o.Current
	d := Decision{Now: now, Action: Hold, Current: c, Desired: c}
	rs.Err = nil
	switch {
	case !o.Valid:
		return holdWithinBounds(d, p, "source unavailable")
	case o.Pending < 0 || o.Running < 0:
		return holdWithinBounds(d, p, "negative count")
	}
	if o.Pending > 0 || o.Running > 0 || rs.LastBusy.IsZero() {
		// The first observation starts the idle clock: a pool that just
		// started has not been idle for long, whatever the queue says.
		rs.LastBusy = now
	}
	env := ruleEnv{
		Pending: o.Pending, Running: o.Running, Paused: s.Paused,
		OldestAge: s.OldestAge, Workers: c, Draining: s.Draining, WorkerCPU: s.WorkerCPU,
		HostCPU: s.Host.CPU, HostCPUEMA: s.HostCPUEMA, PSICPU: s.Host.PSICPU, PSIMemory: s.Host.PSIMemory,
		MemAvailable: int64(min(s.Host.MemAvailable, 1<<62)), IdleSec: now.Sub(rs.LastBusy).Seconds(),
	}
	known := s.known
	if p.NoQueue {
		// Not zero: a rule over a queue that does not exist fails, and
		// holds, rather than reading an empty queue.
		known = func(name string) bool { return !slices.Contains(QueueSignals, name) && s.known(name) }
	}
	ev := ruleEval{rs: rs, now: now, env: env, known: known, results: results}
	for i, r := range rs.Up {
		if ev.try(fmt.Sprintf("scale_up[%d]", i), r) {
			break
		}
	}
	if ev.err == nil && ev.key == "" && rs.Down != nil {
		ev.try("scale_down", rs.Down)
	}
	if ev.err != nil {
		d = holdWithinBounds(d, p, fmt.Sprintf("rule %s failed: %v", ev.key, ev.err))
		d.Rule = ev.key
		rs.Err = fmt.Errorf("rule %s: %w", ev.key, ev.err)
		return d
	}

	target := c
	if ev.key == "scale_down" {
		target = c - ev.rule.Step
	} else if ev.key != "" {
		target = c + ev.rule.Step
	}
	d.Rule = ev.key
	notes := ev.notes
	if t := clamp(target, p); t != target {
		notes = append(notes, fmt.Sprintf("clamped to %d..%d", p.MinWorkers, p.MaxWorkers))
		target = t
	}
	d.Desired, d.Raw = target, target
	d.Action = actionOf(target, c)
	what := "no rule holds"
	if ev.key != "" {
		what = fmt.Sprintf("rule %s (%s) holds, step %d", ev.key, ev.rule.When, ev.rule.Step)
	}
	d.Rationale = fmt.Sprintf("%s: %s", d.Action, what)
	if len(notes) > 0 {
		d.Rationale += " (" + strings.Join(notes, "; ") + ")"
	}
	return d
}

// known says whether the signal a rule reads has a value this tick: a rule
// that reads an unknown one fails rather than comparing against zero.
func (s Signals) known(name string) bool {
	switch name {
	case "oldest_age":
		return s.OldestKnown
	case "worker_cpu":
		return s.WorkerCPUKnown
	case "host_cpu", "host_cpu_ema":
		return s.Host.CPUKnown
	case "psi_cpu", "psi_memory":
		return s.Host.PSIKnown
	case "mem_available":
		return s.Host.MemKnown
	}
	return true
}

// ruleEval walks the rules of one tick in order. key and rule are the rule
// that acts (key "" when none does), or the one that failed with err.
type ruleEval struct {
	rs      *RuleSet
	now     time.Time
	env     ruleEnv
	known   func(string) bool
	results map[string]PromResult

	key   string
	rule  *CompiledRule
	err   error
	notes []string
}

// try evaluates one rule; true ends the walk: the rule acts, or failed.
func (ev *ruleEval) try(key string, r *CompiledRule) bool {
	ok, err := r.eval(ev.env, ev.known, ev.results)
	switch {
	case err != nil:
		ev.key, ev.err = key, err
		return true
	case !ok:
		return false
	}
	if last, seen := ev.rs.LastFired[key]; seen && ev.now.Sub(last) < r.Cooldown {
		ev.notes = append(ev.notes, fmt.Sprintf("%s holds but is in its cooldown (%s of %s)", key, secs(ev.now.Sub(last)), secs(r.Cooldown)))
		return false
	}
	ev.key, ev.rule = key, r
	return true
}

// Acted records that the decision d was carried out: its rule's cooldown
// starts now. A rule whose step the bounds or a limit cut to nothing did
// not act.
func (rs *RuleSet) Acted(d Decision) {
	down := d.Rule == "scale_down"
	if d.Rule != "" && ((down && d.Desired < d.Current) || (!down && d.Desired > d.Current)) {
		rs.LastFired[d.Rule] = d.Now
	}
}
