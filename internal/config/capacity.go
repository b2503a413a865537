package config

import (
	"fmt"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/capacity"
)

// Capacity is the [capacity] table: a budget for the workers of every pool
// together. Zero values mean "not set".
type Capacity struct {
	MaxTotalWorkers     int     // max_total_workers; 0 = no cap on the count
	ReservedCores       float64 // reserved_cores: kept for the host itself
	ReservedMemory      string  // reserved_memory as written, e.g. "2G"
	ReservedMemoryBytes uint64  // derived
}

type rawCapacity struct {
	MaxTotalWorkers value `toml:"max_total_workers"`
	ReservedCores   value `toml:"reserved_cores"`
	ReservedMemory  value `toml:"reserved_memory"`
}

type effectiveCapacity struct {
	MaxTotalWorkers int     `toml:"max_total_workers,omitzero"`
	ReservedCores   float64 `toml:"reserved_cores,omitzero"`
	ReservedMemory  string  `toml:"reserved_memory,omitempty"`
}

func (c Capacity) effective() *effectiveCapacity {
	if c == (Capacity{}) {
		return nil
	}
	return &effectiveCapacity{MaxTotalWorkers: c.MaxTotalWorkers, ReservedCores: c.ReservedCores, ReservedMemory: c.ReservedMemory}
}

func (l *loader) capacity(c *Capacity, r *rawCapacity) {
	if l.integer("capacity.max_total_workers", r.MaxTotalWorkers, &c.MaxTotalWorkers) && c.MaxTotalWorkers < 1 {
		l.add("capacity.max_total_workers", "must be >= 1; leave it out for no cap")
		c.MaxTotalWorkers = 0
	}
	if l.number("capacity.reserved_cores", r.ReservedCores, &c.ReservedCores) && c.ReservedCores < 0 {
		l.add("capacity.reserved_cores", "must be >= 0")
		c.ReservedCores = 0
	}
	if mem, n, ok := l.size("capacity.reserved_memory", r.ReservedMemory, false); ok {
		c.ReservedMemory, c.ReservedMemoryBytes = mem, n
	}
}

// WorkerCost is one worker's share of the host, from its [limits]: no
// cpu_quota or memory_max (or "infinity") is no bound on that resource. A
// gang pool's worker is a group of GroupSize ranks, each with those
// limits: the group costs them all, and min_workers and max_workers count
// groups.
func (p *Pool) WorkerCost() capacity.Cost {
	c := capacity.Cost{Cores: float64(p.Limits.CPUQuotaPerSecUSec) / 1e6}
	if m := p.Limits.MemoryMaxBytes; m != ^uint64(0) {
		c.Memory = m
	}
	return c.Group(p.GroupSize())
}

// Budget is what the configuration leaves for workers on host h.
func (c *Config) Budget(h capacity.Host) capacity.Budget {
	return capacity.NewBudget(h, c.Capacity.ReservedCores, c.Capacity.ReservedMemoryBytes, c.Capacity.MaxTotalWorkers)
}

// readHost is the machine the capacity checks judge; tests replace it.
var readHost = capacity.ReadHost

// Capped is a pool whose max_workers the host cannot hold, or, in a pool
// that joins a fleet, whose capacity it cannot hold.
type Capped struct {
	Pool     string
	From, To int
	Why      string
	// Key is the pool's key that was capped: "max_workers", or
	// "fleet.capacity" in a pool that joins a fleet.
	Key string
}

// CheckCapacity judges the pools' sizes against host h: a min_workers that
// does not fit (alone, or with the other pools' min_workers) is a problem
// naming the pool and the shortfall; a max_workers above what fits is a
// warning, and is what ApplyCapacity caps.
func CheckCapacity(c *Config, h capacity.Host) (problems []Problem, capped []Capped) {
	budget := c.Budget(h)
	host := fmt.Sprintf("this host (%g cores, %s", h.Cores, capacity.FormatBytes(h.Memory))
	if c.Capacity != (Capacity{}) {
		host += fmt.Sprintf("; after [capacity]: %g cores, %s", budget.Cores, capacity.FormatBytes(budget.Memory))
		if budget.Workers > 0 {
			host += fmt.Sprintf(", %d workers", budget.Workers)
		}
	}
	host += ")"
	var sum capacity.Budget // the min_workers of every pool together
	for _, p := range sortedPools(c) {
		cost := p.WorkerCost()
		fit := capacity.Fit(budget, cost)
		if p.Joins() {
			// min_workers and max_workers are the fleet's, which this
			// host need not hold alone: the capacity is this host's.
			if cp, ok := fleetCapped(p, fit, host); ok {
				capped = append(capped, cp)
			}
			continue
		}
		if p.MinWorkers > fit {
			problems = append(problems, Problem{File: c.FileOf(p.Name), Key: poolKey(p, "min_workers"),
				Msg: fmt.Sprintf("%d %s do not fit on %s: short of %s", p.MinWorkers, workersNoun(p), host, capacity.Shortfall(budget, cost, p.MinWorkers))})
		} else if p.MaxWorkers > fit {
			capped = append(capped, Capped{Pool: p.Name, From: p.MaxWorkers, To: fit, Key: "max_workers",
				Why: fmt.Sprintf("only %d %s fit on %s", fit, workersNoun(p), host)})
		}
		sum.Cores += float64(p.MinWorkers) * cost.Cores
		sum.Memory += uint64(p.MinWorkers) * cost.Memory
		sum.Workers += p.MinWorkers * p.GroupSize()
	}
	if len(problems) > 0 {
		return problems, capped
	}
	var short []string
	if sum.Cores > budget.Cores+1e-9 {
		short = append(short, fmt.Sprintf("%g cores (need %g, have %g)", sum.Cores-budget.Cores, sum.Cores, budget.Cores))
	}
	if sum.Memory > budget.Memory {
		short = append(short, fmt.Sprintf("%s of memory (need %s, have %s)", capacity.FormatBytes(sum.Memory-budget.Memory),
			capacity.FormatBytes(sum.Memory), capacity.FormatBytes(budget.Memory)))
	}
	if budget.Workers > 0 && sum.Workers > budget.Workers {
		short = append(short, fmt.Sprintf("%d workers (max_total_workers = %d)", sum.Workers-budget.Workers, budget.Workers))
	}
	if len(short) > 0 {
		msg := "the pools' min_workers together do not fit on " + host + ": short of " + short[0]
		for _, s := range short[1:] {
			msg += " and " + s
		}
		problems = append(problems, Problem{File: c.Path, Key: "pools", Msg: msg})
	}
	return problems, capped
}

// workersNoun is what min_workers and max_workers count: workers, or a
// gang pool's groups.
func workersNoun(p *Pool) string {
	if n := p.GroupSize(); n > 1 {
		return fmt.Sprintf("groups of %d", n)
	}
	return "workers"
}

// CheckHostCapacity is CheckCapacity on this machine, as
// hostcheck.CheckMachine makes it; a host that cannot be read is no reason
// to refuse the file.
func CheckHostCapacity(c *Config) (problems, warnings []Problem) {
	h, err := readHost()
	if err != nil {
		return nil, []Problem{{File: c.Path, Key: "capacity", Msg: fmt.Sprintf("cannot check that the pools fit: %v", err)}}
	}
	problems, capped := CheckCapacity(c, h)
	for _, cp := range capped {
		warnings = append(warnings, Problem{File: c.FileOf(cp.Pool), Key: poolKey(c.Pools[cp.Pool], strings.Split(cp.Key, ".")...),
			Msg: fmt.Sprintf("%d is above capacity (%s): capped at %d", cp.From, cp.Why, cp.To)})
	}
	return problems, warnings
}

// ApplyCapacity caps every pool's max_workers at what fits on this machine,
// and returns the pools it capped, for the daemon to log. A pool that joins
// a fleet keeps its max_workers, which is the fleet's: its capacity is
// resolved instead (resolveFleetCapacity). It is only called on a
// configuration that hostcheck.CheckMachine accepted.
func ApplyCapacity(c *Config) []Capped {
	h, err := readHost()
	if err != nil {
		// Nothing is known to cap: "auto" is then max_workers.
		for _, p := range c.Pools {
			resolveFleetCapacity(p, capacity.Unlimited)
		}
		return nil
	}
	// Judged before the capacities are resolved, so that a written one
	// above what fits is reported.
	_, capped := CheckCapacity(c, h)
	budget := c.Budget(h)
	for _, p := range c.Pools {
		resolveFleetCapacity(p, capacity.Fit(budget, p.WorkerCost()))
	}
	for _, cp := range capped {
		if p := c.Pools[cp.Pool]; !p.Joins() {
			p.MaxWorkers = cp.To
		}
	}
	return capped
}
