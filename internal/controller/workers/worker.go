package workers

import (
	"slices"
	"sort"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/slots"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Worker is a live worker: active or activating, not draining.
type Worker struct {
	slot       int
	unit       string
	invocation string
	revision   string    // the definition it runs; "" = unknown (an older daemon's)
	since      time.Time // when it became active, on the controller's clock
	// size is its ranks when it is a gang group (gang.go), else 0 or 1.
	size int

	// CPU accounting between ticks.
	prevUsage time.Duration
	prevAt    time.Time
	havePrev  bool
	util      float64
	utilKnown bool

	// A service replica's (service.go): its ports, kept for its life, and
	// its readiness.
	ports     map[string]int
	rankPorts []map[string]int // a gang group's ranks 1 … N-1 (gang.go)
	rd        readiness
	// claim is what its probe (or systemd) last said; rd is ready only
	// while its ports are its own too (portguard.go).
	claim         readiness
	cgroup        string    // its unit's ControlGroup, once known
	rankCgroups   []string  // a gang group's ranks 1 … N-1's
	socketCgroup  string    // its socket unit's ControlGroup, once known (socket = true ports)
	readyFrom     time.Time // ready_timeout_sec counts from here
	notReadySince time.Time
	everReady     bool // it has been in discovery: it leaves through a drain
	probeID       string
	// listedFrom is the first listing (slots.Table.Listings) begun after its
	// start ended: an earlier one may not show it yet.
	listedFrom uint64
}

// The slot table (internal/slots) keeps the pool's workers; these are the
// names the package uses for its types.
type (
	SlotTable    = slots.Table[*Worker]
	reconciled   = slots.Reconciled[*Worker]
	crash        = slots.Crash[*Worker]
	stopped      = slots.Stopped
	drainingUnit = slots.Draining
	slotBackoff  = slots.Backoff
	rankExit     = slots.RankExit
	unitIndex    = slots.Index
)

const (
	backoffMin   = slots.BackoffMin
	backoffMax   = slots.BackoffMax
	backoffReset = slots.BackoffReset
)

func newSlotTable() *SlotTable {
	return slots.New(func(w units.Worker, since time.Time, size int) *Worker {
		return &Worker{slot: w.Slot, unit: w.Unit, invocation: w.InvocationID, revision: w.Revision, since: since, size: size}
	})
}

// What the slot table reads and updates of a worker (slots.Worker).

func (w *Worker) Slot() int          { return w.slot }
func (w *Worker) Unit() string       { return w.unit }
func (w *Worker) Invocation() string { return w.invocation }
func (w *Worker) Since() time.Time   { return w.since }
func (w *Worker) Size() int          { return w.size }
func (w *Worker) ListedFrom() uint64 { return w.listedFrom }

func (w *Worker) Listed(invocation, revision string) {
	if invocation != "" {
		w.invocation = invocation
	}
	if revision != "" {
		w.revision = revision
	}
}

// Restarted starts its CPU accounting over: the new run's usage counts
// from zero.
func (w *Worker) Restarted(invocation, revision string, since time.Time) {
	w.invocation, w.revision, w.since, w.havePrev = invocation, revision, since, false
}

func indexByUnit(listed []units.Worker) unitIndex { return slots.IndexByUnit(listed) }

func sortedKeys[K int | string, V any](m map[K]V) []K { return slots.SortedKeys(m) }

// PickVictims chooses the n workers to stop, in policy.VictimBefore's
// order, which the workload simulator shares.
func PickVictims(ws []*Worker, n int, revision string) []*Worker {
	ws = slices.Clone(ws)
	sort.Slice(ws, func(i, j int) bool {
		return policy.VictimBefore(victim(ws[i], revision), victim(ws[j], revision))
	})
	return ws[:max(0, min(n, len(ws)))]
}

// victim is what the victim order looks at.
func victim(w *Worker, revision string) policy.Victim {
	return policy.Victim{Slot: w.slot, Util: w.util, Outdated: outdated(w, revision)}
}

// outdated says whether w runs another definition than revision. A worker
// whose revision is unknown (started by a daemon that did not record it) is
// taken as current: an upgrade of the daemon must not replace every worker.
func outdated(w *Worker, revision string) bool {
	return w.revision != "" && revision != "" && w.revision != revision
}

// Ports are a service replica's ports, by name; Ready says whether it is in
// discovery's ready set (its probe passed and its ports are its own).
func (w *Worker) Ports() map[string]int { return w.ports }
func (w *Worker) Ready() bool           { return w.rd == repReady }
