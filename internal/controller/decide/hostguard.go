package decide

import (
	"sync"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/hostload"
	"github.com/flexiq/flexiq-scaled/internal/policy"
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

// Forget drops a pool that is gone from the victims' list.
func (g *HostGuard) Forget(pool string) {
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
