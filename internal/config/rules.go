package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// A pool's scaling policy beyond the HPA formula: its priority for the host
// guard, the trigger rules of policy = "rules", and the rate limits and
// cooldowns of [pools.NAME.behavior]. All optional; left out, a pool scales
// as before.

// Policies.
const (
	PolicyHPA   = "hpa"
	PolicyRules = "rules"
)

// DefaultScrapeInterval is Prometheus's own default scrape interval, which
// promql() range windows are checked against when the source names none.
const DefaultScrapeInterval = 15 * time.Second

// Scaling is a pool's policy settings.
type Scaling struct {
	// Priority orders the pools that give up workers in a host guard
	// emergency: the lowest first.
	Priority int
	Policy   string // PolicyHPA (default) or PolicyRules
	// ScaleUp and ScaleDown are the rules of policy = "rules".
	ScaleUp   []policy.Rule
	ScaleDown *policy.Rule
	Behavior  policy.Behavior
}

// rawScaling is embedded in rawPool: its keys are the pool table's own. The
// rule and behaviour tables are read by hand, key by key, so that a typo in
// them is named as the rest of the file's are.
type rawScaling struct {
	Priority  value `toml:"priority"`
	Policy    value `toml:"policy"`
	ScaleUp   value `toml:"scale_up"`
	ScaleDown value `toml:"scale_down"`
	Behavior  value `toml:"behavior"`
}

// scaling builds and checks the pool's policy settings; after source, whose
// Prometheus settings promql() uses.
func (l *loader) scaling(p *Pool, r *rawScaling, key func(...string) string) {
	s := &p.Scaling
	l.integer(key("priority"), r.Priority, &s.Priority)
	s.Policy = PolicyHPA
	if l.str(key("policy"), r.Policy, &s.Policy) && s.Policy != PolicyHPA && s.Policy != PolicyRules {
		l.add(key("policy"), "unknown policy %q (want %q, the HPA formula, or %q, the scale_up and scale_down rules)", s.Policy, PolicyHPA, PolicyRules)
		s.Policy = PolicyHPA
	}
	l.behavior(s, r.Behavior, key)

	if s.Policy != PolicyRules {
		for _, k := range []string{"scale_up", "scale_down"} {
			if (k == "scale_up" && r.ScaleUp.set()) || (k == "scale_down" && r.ScaleDown.set()) {
				l.add(key(k), `rules are read only with policy = "rules"`)
			}
		}
		return
	}
	var rules []any
	switch raw := r.ScaleUp.raw.(type) {
	case nil:
	case []map[string]any:
		for _, m := range raw {
			rules = append(rules, m)
		}
	case []any:
		rules = raw
	default:
		l.wrongType(key("scale_up"), "an array of tables, as in [[pools.NAME.scale_up]]", r.ScaleUp)
	}
	for i, raw := range rules {
		k := fmt.Sprintf("%s[%d]", key("scale_up"), i)
		if rule, ok := l.rule(k, raw, p); ok {
			s.ScaleUp = append(s.ScaleUp, rule)
		}
	}
	if r.ScaleDown.set() {
		if rule, ok := l.rule(key("scale_down"), r.ScaleDown.raw, p); ok {
			s.ScaleDown = &rule
		}
	}
	if !r.ScaleUp.set() && !r.ScaleDown.set() {
		l.add(key("policy"), `"rules" needs at least one [[pools.%s.scale_up]] or a [pools.%s.scale_down]`, p.Name, p.Name)
	}
}

// table reads raw as a table with only the keys in allowed; unknown keys are
// problems.
func (r *reader) table(key string, raw any, allowed ...string) (map[string]value, bool) {
	m, ok := raw.(map[string]any)
	if !ok {
		r.wrongType(key, "a table", value{raw})
		return nil, false
	}
	out := map[string]value{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(allowed, k) {
			r.add(key+"."+k, "unknown key (want %s)", strings.Join(allowed, ", "))
			continue
		}
		out[k] = value{m[k]}
	}
	return out, true
}

// rule reads one rule table and compiles its expression, so that a rule
// that cannot run is refused at load with where it went wrong.
func (l *loader) rule(key string, raw any, p *Pool) (policy.Rule, bool) {
	r := policy.Rule{Step: 1}
	m, ok := l.table(key, raw, ruleKeys.Names()...)
	if !ok {
		return r, false
	}
	good := true
	if !m["when"].set() {
		l.add(key+".when", "missing: the condition, e.g. when = \"pending > 0\"")
		good = false
	} else if !l.str(key+".when", m["when"], &r.When) {
		good = false
	}
	if l.seconds(key+".cooldown_sec", m["cooldown_sec"], &r.Cooldown) && r.Cooldown < 0 {
		l.add(key+".cooldown_sec", "must be >= 0")
		good = false
	}
	if l.integer(key+".step", m["step"], &r.Step) && r.Step < 1 {
		l.add(key+".step", "must be >= 1")
		good = false
	}
	if !good {
		return r, false
	}
	c, err := policy.CompileRule(r)
	if err != nil {
		l.add(key+".when", "%v", err)
		return r, false
	}
	if len(c.Queries) > 0 {
		prom := l.promQLServer(p)
		if prom == nil {
			l.add(key+".when", `promql() needs a Prometheus server: set the daemon-level [prometheus] table, or make the pool's source type = %s (it has %q)`, promQLSources(), p.Source.Type)
			return r, false
		}
		for _, q := range c.Queries {
			if err := checkRanges(q, prom.PromQLScrapeInterval()); err != nil {
				l.add(key+".when", "promql(%q): %v", q, err)
				good = false
			}
		}
	}
	return r, good
}

// behavior reads [pools.NAME.behavior].
func (l *loader) behavior(s *Scaling, v value, key func(...string) string) {
	if !v.set() {
		return
	}
	k := key("behavior")
	m, ok := l.table(k, v.raw, behaviorKeys.Names()...)
	if !ok {
		return
	}
	b := &s.Behavior
	if l.seconds(k+".cooldown_sec", m["cooldown_sec"], &b.Cooldown) && b.Cooldown < 0 {
		l.add(k+".cooldown_sec", "must be >= 0")
		b.Cooldown = 0
	}
	for _, dir := range []struct {
		name string
		dst  *policy.DirectionBehavior
	}{{"scale_up", &b.Up}, {"scale_down", &b.Down}} {
		if m[dir.name].set() {
			l.direction(k+"."+dir.name, m[dir.name].raw, dir.dst)
		}
	}
}

func (l *loader) direction(key string, raw any, d *policy.DirectionBehavior) {
	m, ok := l.table(key, raw, behaviorDirectionKeys.Names()...)
	if !ok {
		return
	}
	if l.seconds(key+".cooldown_sec", m["cooldown_sec"], &d.Cooldown) && d.Cooldown < 0 {
		l.add(key+".cooldown_sec", "must be >= 0")
		d.Cooldown = 0
	}
	if l.str(key+".select", m["select"], &d.Select) && !slices.Contains([]string{policy.SelectMax, policy.SelectMin, policy.SelectDisabled}, d.Select) {
		l.add(key+".select", "unknown %q (want %q: the policy that allows the most change, %q: the least, or %q: no scaling in this direction)",
			d.Select, policy.SelectMax, policy.SelectMin, policy.SelectDisabled)
		d.Select = ""
	}
	var list []any
	switch raw := m["policies"].raw.(type) {
	case nil:
	case []any:
		list = raw
	case []map[string]any:
		for _, t := range raw {
			list = append(list, t)
		}
	default:
		l.wrongType(key+".policies", "an array of tables, as in [{ type = \"workers\", value = 4, period_sec = 15 }]", m["policies"])
	}
	for i, raw := range list {
		pk := fmt.Sprintf("%s.policies[%d]", key, i)
		pm, ok := l.table(pk, raw, behaviorPolicyKeys.Names()...)
		if !ok {
			continue
		}
		var rl policy.RateLimit
		good := true
		for _, req := range []string{"type", "value", "period_sec"} {
			if !pm[req].set() {
				l.add(pk+"."+req, "missing")
				good = false
			}
		}
		if l.str(pk+".type", pm["type"], &rl.Type) && rl.Type != policy.LimitWorkers && rl.Type != policy.LimitPercent {
			l.add(pk+".type", "unknown %q (want %q or %q)", rl.Type, policy.LimitWorkers, policy.LimitPercent)
			good = false
		}
		if l.integer(pk+".value", pm["value"], &rl.Value) && rl.Value < 1 {
			l.add(pk+".value", "must be >= 1")
			good = false
		}
		if l.seconds(pk+".period_sec", pm["period_sec"], &rl.Period) && rl.Period <= 0 {
			l.add(pk+".period_sec", "must be > 0")
			good = false
		}
		if good {
			d.Policies = append(d.Policies, rl)
		}
	}
	if d.Select == "" && len(d.Policies) > 0 {
		d.Select = policy.SelectMax
	}
	if d.Select != "" && d.Select != policy.SelectDisabled && len(d.Policies) == 0 && m["select"].set() {
		l.add(key+".select", "%q selects among policies, and there are none", d.Select)
	}
}

// checkRanges checks the range selectors of a PromQL query: a window that
// holds fewer than two scrapes gives rate(), increase() and the like one
// sample or none, so the query returns nothing and the rule never fires.
// Prometheus's parser is not in the module graph, so this is a scanner: it
// finds every [range] or [range:step] outside string literals, and checks
// that brackets and parentheses balance.
func checkRanges(q string, scrape time.Duration) error {
	if scrape <= 0 {
		scrape = DefaultScrapeInterval
	}
	var funcs []string // enclosing calls, innermost last ("" for plain parentheses)
	rs := []rune(q)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '"', '\'', '`':
			j := i + 1
			for j < len(rs) && rs[j] != c {
				if rs[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(rs) {
				return fmt.Errorf("unterminated string at column %d", i+1)
			}
			i = j
		case '#':
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
		case '(':
			j := i - 1
			for j >= 0 && rs[j] == ' ' {
				j--
			}
			end := j + 1
			for j >= 0 && (rs[j] == '_' || rs[j] >= 'a' && rs[j] <= 'z' || rs[j] >= 'A' && rs[j] <= 'Z' || rs[j] >= '0' && rs[j] <= '9') {
				j--
			}
			funcs = append(funcs, string(rs[j+1:end]))
		case ')':
			if len(funcs) == 0 {
				return fmt.Errorf("unbalanced ')' at column %d", i+1)
			}
			funcs = funcs[:len(funcs)-1]
		case '[':
			j := i + 1
			for j < len(rs) && rs[j] != ']' {
				j++
			}
			if j >= len(rs) {
				return fmt.Errorf("unbalanced '[' at column %d", i+1)
			}
			inner := strings.TrimSpace(string(rs[i+1 : j]))
			window, _, _ := strings.Cut(inner, ":")
			d, err := promDuration(strings.TrimSpace(window))
			if err != nil {
				return fmt.Errorf("range [%s] at column %d: %v", inner, i+1, err)
			}
			if d < 2*scrape {
				in := ""
				if n := len(funcs); n > 0 && funcs[n-1] != "" {
					in = fmt.Sprintf(" read by %s()", funcs[n-1])
				}
				return fmt.Errorf("range [%s]%s is shorter than twice the scrape interval (scrape_interval_sec = %s): it holds fewer than two samples, so the query returns nothing",
					inner, in, strconv.FormatFloat(scrape.Seconds(), 'f', -1, 64))
			}
			i = j
		case ']':
			return fmt.Errorf("unbalanced ']' at column %d", i+1)
		}
	}
	if len(funcs) > 0 {
		return fmt.Errorf("unbalanced '(': %d not closed", len(funcs))
	}
	return nil
}

// promDuration reads a range as Prometheus does: a duration such as 5m or
// 1h30m, or a number of seconds.
func promDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 {
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 5m", s)
	}
	return time.Duration(d), nil
}

// effectiveScaling is how WriteEffective writes a pool's policy settings;
// embedded in effectivePool. Rules and behaviour are written as the file
// has them.
type effectiveScaling struct {
	Priority  int              `toml:"priority,omitzero"`
	Policy    string           `toml:"policy"`
	ScaleUp   []map[string]any `toml:"scale_up,omitempty"`
	ScaleDown map[string]any   `toml:"scale_down,omitempty"`
	Behavior  map[string]any   `toml:"behavior,omitempty"`
}

func (s Scaling) effective() effectiveScaling {
	e := effectiveScaling{Priority: s.Priority, Policy: s.Policy}
	rule := func(r policy.Rule) map[string]any {
		return map[string]any{"when": r.When, "cooldown_sec": r.Cooldown.Seconds(), "step": r.Step}
	}
	for _, r := range s.ScaleUp {
		e.ScaleUp = append(e.ScaleUp, rule(r))
	}
	if s.ScaleDown != nil {
		e.ScaleDown = rule(*s.ScaleDown)
	}
	b := s.Behavior
	dir := func(d policy.DirectionBehavior) map[string]any {
		m := map[string]any{}
		if d.Select != "" {
			m["select"] = d.Select
		}
		if d.Cooldown > 0 {
			m["cooldown_sec"] = d.Cooldown.Seconds()
		}
		var ps []map[string]any
		for _, p := range d.Policies {
			ps = append(ps, map[string]any{"type": p.Type, "value": p.Value, "period_sec": p.Period.Seconds()})
		}
		if len(ps) > 0 {
			m["policies"] = ps
		}
		return m
	}
	m := map[string]any{}
	if b.Cooldown > 0 {
		m["cooldown_sec"] = b.Cooldown.Seconds()
	}
	if d := dir(b.Up); len(d) > 0 {
		m["scale_up"] = d
	}
	if d := dir(b.Down); len(d) > 0 {
		m["scale_down"] = d
	}
	if len(m) > 0 {
		e.Behavior = m
	}
	return e
}
