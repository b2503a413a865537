package simulate

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// Issue 9's policies in the replay: trigger rules, rate limits and
// cooldowns, and the host guard, through the daemon's own pipeline
// (policy.Pipeline), so that the replay cannot drift from it. The host is read from the trace's
// optional host columns, one sample per row; the simulated pool is the only
// pool on its host, so an emergency is always its own.

// Host and rule columns. A promql() condition is a column named
// "promql:" followed by the query, exactly as the rule writes it: 1 (or any
// non-zero number) fires, 0 does not, an empty cell is a failed query,
// which holds the pool.
const (
	colPaused       = "paused"
	colHostCPU      = "host_cpu"
	colPSICPU       = "psi_cpu"
	colPSIMemory    = "psi_memory"
	colMemAvailable = "mem_available"
	promqlPrefix    = "promql:"
)

var hostColumns = []string{colPaused, colHostCPU, colPSICPU, colPSIMemory, colMemAvailable}

// hostCells is what a row says of the host and of the rules' queries.
type hostCells struct {
	paused int64
	host   policy.HostReading
	prom   map[string]policy.PromResult
}

// parseHost reads a row's optional host and promql columns.
func parseHost(rec []string, cols map[string]int) (hostCells, error) {
	var h hostCells
	cell := func(name string) string {
		if i, ok := cols[name]; ok {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	if c := cell(colPaused); c != "" {
		n, err := parseInt(c)
		if err == nil && n < 0 {
			err = fmt.Errorf("must not be negative")
		}
		if err != nil {
			return h, &cellError{colPaused, err.Error()}
		}
		h.paused = n
	}
	for _, f := range []struct {
		col   string
		dst   *float64
		known *bool
		max   float64
	}{
		{colHostCPU, &h.host.CPU, &h.host.CPUKnown, 1},
		{colPSICPU, &h.host.PSICPU, &h.host.PSIKnown, 100},
		{colPSIMemory, &h.host.PSIMemory, &h.host.PSIKnown, 100},
	} {
		c := cell(f.col)
		if c == "" {
			continue
		}
		v, err := parseFloat(c)
		if err == nil && (v < 0 || v > f.max) {
			err = fmt.Errorf("%g is outside 0..%g", v, f.max)
		}
		if err != nil {
			return h, &cellError{f.col, err.Error()}
		}
		*f.dst, *f.known = v, true
	}
	if c := cell(colMemAvailable); c != "" {
		v, err := strconv.ParseUint(c, 10, 64)
		if err != nil {
			return h, &cellError{colMemAvailable, fmt.Sprintf("%q is not a byte count", c)}
		}
		h.host.MemAvailable, h.host.MemKnown = v, true
	}
	for name, i := range cols {
		q, ok := strings.CutPrefix(name, promqlPrefix)
		if !ok {
			continue
		}
		if h.prom == nil {
			h.prom = map[string]policy.PromResult{}
		}
		c := strings.TrimSpace(rec[i])
		if c == "" {
			h.prom[q] = policy.PromResult{Err: fmt.Errorf("the query failed (empty cell)")}
			continue
		}
		v, err := parseFloat(c)
		if err != nil {
			return h, &cellError{name, err.Error()}
		}
		h.prom[q] = policy.PromResult{Fires: v != 0}
	}
	return h, nil
}

// stepper decides one pool's ticks as the daemon does.
type stepper struct {
	pool  *config.Pool
	guard *config.HostGuard

	params policy.Params
	pipe   *policy.Pipeline // the daemon's pipeline
	ema    policy.EWMA
	emaSet bool
	lastEm time.Time
}

func newStepper(pool *config.Pool, guard *config.HostGuard) (*stepper, error) {
	s := &stepper{pool: pool, guard: guard, params: pool.PolicyParams()}
	var rules *policy.RuleSet
	if pool.Scaling.Policy == config.PolicyRules {
		var err error
		if rules, err = policy.CompileRules(pool.Scaling.ScaleUp, pool.Scaling.ScaleDown); err != nil {
			return nil, err
		}
	}
	s.pipe = policy.NewPipeline(pool.Scaling.Policy, pool.Scaling.Behavior, rules)
	return s, nil
}

// extended says whether the output needs the columns of issue 9's policies.
func (s *stepper) extended(cols map[string]int) bool {
	if s.pipe.Rules != nil || s.guard != nil || s.pool.Scaling.Behavior.Longest() > 0 ||
		s.pool.Scaling.Behavior.Up.Select != "" || s.pool.Scaling.Behavior.Down.Select != "" {
		return true
	}
	for _, c := range hostColumns {
		if _, ok := cols[c]; ok {
			return true
		}
	}
	return false
}

// step is one tick: the decision, and the host as the guard saw it.
func (s *stepper) step(now time.Time, o policy.Observation, tk tick) (policy.Decision, policy.HostState) {
	var host policy.HostState
	host.Reading = tk.host.host
	alphaUp, alphaDown := 0.5, 0.1
	if s.guard != nil {
		alphaUp, alphaDown = s.guard.AlphaUp, s.guard.AlphaDown
	}
	if host.Reading.CPUKnown {
		host.EMA, s.emaSet = s.ema.Update(host.Reading.CPU, alphaUp, alphaDown), true
	} else if s.emaSet {
		host.EMA = s.ema.Value
	}

	in := policy.NewInput(now, s.params, o, tk.host.paused, 0, host, tk.host.prom)
	if s.guard != nil {
		// The simulated pool is the only one on its host: it is the
		// emergency's victim whenever it is above its minimum.
		in.Guard = &policy.GuardInput{
			Verdict: policy.Judge(s.guard.GuardParams, host),
			Victim:  o.Current > s.pool.MinWorkers,
			Due:     policy.EmergencyDue(now, s.lastEm, s.guard.EmergencyCooldown),
		}
	}
	d := s.pipe.Decide(in).Decision
	if s.pipe.Acted(now, d) {
		s.lastEm = now
	}
	return d, host
}

// hostCPU is a reading for the output: nil when unknown.
func hostCPU(h policy.HostState) (cpu, ema *float64) {
	if !h.Reading.CPUKnown {
		return nil, nil
	}
	c, e := round3(h.Reading.CPU), round3(h.EMA)
	return &c, &e
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
