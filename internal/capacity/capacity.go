// Package capacity is the host's worker budget: how many workers of each
// pool fit on the machine, given their per-worker limits (cpu_quota,
// memory_max) and the daemon-wide [capacity] table, and, at run time, a
// ledger shared by the pools that says how many more may start. It does no
// I/O besides ReadHost, so that its arithmetic is table-tested.
package capacity

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Host is what the machine offers.
type Host struct {
	Cores  float64 // online CPUs the daemon may use
	Memory uint64  // bytes of RAM (MemTotal)
}

// Budget is what the daemon may hand out to workers: the host less the
// reserves, and an optional cap on the total count. Zero Workers means no
// cap on the count.
type Budget struct {
	Cores   float64
	Memory  uint64
	Workers int
}

// Cost is one worker's share of the host: its CPU quota in cores and its
// memory limit in bytes. Zero means "not limited": such a worker is counted
// against max_total_workers only, since nothing bounds what it takes.
type Cost struct {
	Cores  float64
	Memory uint64
	// Units is how many units one worker is, as max_total_workers counts
	// them: a gang group's ranks (see Group); 0 means 1.
	Units int
}

// Limited says whether the cost bounds anything.
func (c Cost) Limited() bool { return c.Cores > 0 || c.Memory > 0 }

// Group is the cost of a worker that is a gang group of n units, each of
// cost c: n times its cores and memory (saturated, never wrapped), and n
// units. A group of one is c itself.
func (c Cost) Group(n int) Cost {
	if n <= 1 {
		return c
	}
	g := Cost{Cores: c.Cores * float64(n), Memory: c.Memory, Units: n * c.units()}
	if hi, lo := bits.Mul64(c.Memory, uint64(n)); hi > 0 {
		g.Memory = math.MaxUint64
	} else {
		g.Memory = lo
	}
	return g
}

// units is Units with its zero read as 1.
func (c Cost) units() int { return max(1, c.Units) }

// Unlimited is the Fit of a pool that nothing bounds.
const Unlimited = math.MaxInt

// NewBudget is the host less the reserves; a reserve larger than the host
// leaves nothing.
func NewBudget(h Host, reservedCores float64, reservedMemory uint64, maxTotal int) Budget {
	b := Budget{Cores: max(0, h.Cores-reservedCores), Workers: maxTotal}
	if h.Memory > reservedMemory {
		b.Memory = h.Memory - reservedMemory
	}
	return b
}

// Fit is how many workers of cost c fit in b, cores and memory floored
// independently: the smaller of the two, and of the count cap. A pool
// whose workers are not limited at all fits Unlimited times (or the count
// cap).
func Fit(b Budget, c Cost) int {
	n := Unlimited
	if c.Cores > 0 {
		// A hair of slack, so that 4 cores hold four 100% quotas even
		// when the reserve left 3.9999999 after float arithmetic.
		n = min(n, int(math.Floor(b.Cores/c.Cores+1e-9)))
	}
	if c.Memory > 0 {
		n = min(n, int(b.Memory/c.Memory))
	}
	if b.Workers > 0 {
		n = min(n, b.Workers/c.units())
	}
	return max(0, n)
}

// Shortfall says what is missing for n workers of cost c to fit in b, as
// "1.5 cores" or "512 MiB of memory" or "2 workers", joined by " and "; ""
// when they fit.
func Shortfall(b Budget, c Cost, n int) string {
	var missing []string
	if need := float64(n) * c.Cores; c.Cores > 0 && need > b.Cores+1e-9 {
		missing = append(missing, fmt.Sprintf("%s cores (need %s, have %s)", fmtCores(need-b.Cores), fmtCores(need), fmtCores(b.Cores)))
	}
	if c.Memory > 0 {
		// n * memory_max in 128 bits: a huge min_workers times a huge
		// memory_max must not wrap around into "it fits".
		hi, need := bits.Mul64(uint64(max(0, n)), c.Memory)
		switch {
		case hi > 0:
			missing = append(missing, fmt.Sprintf("memory (need more than 16 EiB, have %s)", FormatBytes(b.Memory)))
		case need > b.Memory:
			missing = append(missing, fmt.Sprintf("%s of memory (need %s, have %s)", FormatBytes(need-b.Memory), FormatBytes(need), FormatBytes(b.Memory)))
		}
	}
	if u := n * c.units(); b.Workers > 0 && u > b.Workers {
		group := ""
		if c.units() > 1 {
			group = fmt.Sprintf("; a group is %d", c.units())
		}
		missing = append(missing, fmt.Sprintf("%d workers (max_total_workers = %d%s)", u-b.Workers, b.Workers, group))
	}
	return strings.Join(missing, " and ")
}

func fmtCores(c float64) string { return strconv.FormatFloat(math.Round(c*1000)/1000, 'f', -1, 64) }

// FormatBytes is n in the largest binary unit that keeps one decimal.
func FormatBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) + " " + units[i]
}

// ReadHost reads the CPUs this process may run on and the RAM, through
// sysinfo(2) rather than /proc/meminfo, which the daemon's sandbox hides
// (ProcSubset=pid).
func ReadHost() (Host, error) {
	h := Host{Cores: float64(runtime.NumCPU())}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return h, fmt.Errorf("reading the host's memory: sysinfo: %w", err)
	}
	h.Memory = uint64(si.Totalram) * uint64(max(si.Unit, 1))
	return h, nil
}

// Ledger is the budget at run time, shared by every pool of the daemon:
// each pool tells it how many of its units exist, and claims room before it
// starts more. Units still draining count: they hold their memory and CPU
// until systemd reports them gone. It is safe for concurrent use; the zero
// of *Ledger (nil) grants everything.
type Ledger struct {
	mu     sync.Mutex
	budget Budget
	pools  map[string]usage
}

type usage struct {
	cost  Cost
	units int
}

// NewLedger is an empty ledger over b.
func NewLedger(b Budget) *Ledger { return &Ledger{budget: b, pools: map[string]usage{}} }

// SetBudget replaces the budget (a reload).
func (l *Ledger) SetBudget(b Budget) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.budget = b
}

// Set records that pool has units workers of cost c (a gang pool's
// workers being its groups, c their cost).
func (l *Ledger) Set(pool string, c Cost, units int) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pools[pool] = usage{cost: c, units: max(0, units)}
}

// Forget drops a pool (removed, and its units gone).
func (l *Ledger) Forget(pool string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pools, pool)
}

// Claim grants pool up to n more workers of cost c, as many as the room
// left by every pool allows, records them, and returns how many it granted
// and, when fewer than n, what ran out.
func (l *Ledger) Claim(pool string, c Cost, n int) (int, string) {
	if l == nil || n <= 0 {
		return max(0, n), ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	free, total := l.budget, 0
	for name, u := range l.pools {
		if name == pool {
			u.cost = c // the pool's units are of its current cost
		}
		free.Cores -= float64(u.units) * u.cost.Cores
		free.Memory -= min(free.Memory, uint64(u.units)*u.cost.Memory)
		total += u.units * u.cost.units()
	}
	free.Cores = max(0, free.Cores)
	granted := n
	if l.budget.Workers > 0 {
		free.Workers = l.budget.Workers - total
		if free.Workers <= 0 {
			granted, free.Workers = 0, 0
		}
	}
	if granted > 0 {
		granted = min(granted, Fit(free, c))
	}
	u := l.pools[pool]
	u.cost, u.units = c, u.units+granted
	l.pools[pool] = u
	if granted == n {
		return granted, ""
	}
	why := Shortfall(free, c, n)
	if l.budget.Workers > 0 && free.Workers == 0 {
		why = fmt.Sprintf("max_total_workers = %d reached", l.budget.Workers)
	}
	return granted, why
}
