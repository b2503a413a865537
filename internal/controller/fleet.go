package controller

import (
	"slices"
	"sort"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Crash backoff per slot: 1 s doubling to 60 s, so that a crash loop never
// spins. A worker that stayed up this long before crashing starts over at 1 s.
const (
	backoffMin   = time.Second
	backoffMax   = 60 * time.Second
	backoffReset = 60 * time.Second
)

// worker is a live worker: active or activating, not draining.
type worker struct {
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
	// listedFrom is the first listing (fleet.listings) begun after its
	// start ended: an earlier one may not show it yet.
	listedFrom uint64
}

// drainingUnit is a unit on its way out: stopped by us, or seen deactivating
// (an admin's systemctl stop, or our own drain before a restart). Its slot
// stays taken until systemd reports the unit gone, however long that takes.
type drainingUnit struct {
	slot  int
	ours  bool           // we asked for the stop
	ports map[string]int // a replica's, held until it is gone
	// rank: a unit of a gang group that has ended (gang.go), held until
	// systemd is done with it; its end is not reported, the group's was.
	rank bool
}

type slotBackoff struct {
	delay time.Duration
	until time.Time
	// failures counts the slot's crashes and failed starts in a row: a
	// worker that stays up backoffReset starts the count over.
	failures int
}

// fleet is the pool's record of its units, as of the last listing: which
// slots hold live workers, which are draining, and which are backing off
// after a crash. It does no I/O: reconcile turns a listing into events that
// workers reports and acts on.
type fleet struct {
	live     map[int]*worker
	draining map[string]drainingUnit // by unit name
	backoff  map[int]*slotBackoff
	// starting are the workers whose start is in flight (acting.go), by
	// the slot reserved for them.
	starting map[int]*worker
	// taken are slots whose unit a start found still there, until the
	// next listing says what holds them.
	taken map[int]bool
	// listings numbers the listings begun; asOf is the one being
	// reconciled, 0 for a listing that judges every worker (one made
	// while no start was in flight).
	listings, asOf uint64
}

func newFleet() *fleet {
	return &fleet{live: map[int]*worker{}, draining: map[string]drainingUnit{}, backoff: map[int]*slotBackoff{},
		starting: map[int]*worker{}, taken: map[int]bool{}}
}

// unitState classifies a listed unit.
type unitState int

const (
	stateGone     unitState = iota // not listed, or inactive: systemd is done with it
	stateRunning                   // active, activating or reloading
	stateStopping                  // deactivating: its stop is under way
	stateFailed                    // failed: kept loaded for its Result until reset
)

func classify(w units.Worker, listed bool) unitState {
	if !listed {
		return stateGone
	}
	switch w.ActiveState {
	case "active", "activating", "reloading":
		return stateRunning
	case "deactivating":
		return stateStopping
	case "failed":
		return stateFailed
	}
	return stateGone
}

// Events that reconcile reports.
type (
	// crash: a live worker stopped without being asked.
	crash struct {
		worker *worker
		unit   units.Worker // as listed; zero if it was unloaded
		loaded bool
		delay  time.Duration // the slot's backoff
		// exit is the rank that ended a gang group (gang.go); nil for a
		// single unit.
		exit *rankExit
	}
	// stopped: a draining unit is gone.
	stopped struct {
		unit   string
		slot   int
		ours   bool
		result string // the unit's Result: "success" when it was unloaded cleanly
		exit   units.Worker
	}
	// stopping: a live worker is being stopped by someone else.
	stopping struct{ worker *worker }
	// restarted: a live worker was restarted behind our back (new invocation).
	restarted struct{ worker *worker }
)

type reconciled struct {
	crashed   []crash
	stopped   []stopped
	stopping  []stopping
	restarted []restarted
	adopted   []*worker
	// resets are failed units to reset, so that systemd unloads them and
	// their names can be used again.
	resets []string
	// stops are units to stop: the ranks of a gang group that has lost
	// one, should systemd's own binding not have stopped them already.
	stops []string
}

// reconcile brings the fleet in line with a listing of the pool's units:
// the draining units first, then the live workers, then the units it did
// not know.
func (f *fleet) reconcile(now time.Time, listed []units.Worker) reconciled {
	var r reconciled
	clear(f.taken)
	byUnit := indexByUnit(listed)
	f.reconcileDraining(byUnit, &r)
	f.reconcileLive(now, byUnit, &r)
	f.adoptListed(now, listed, &r)
	f.holdRanks(listed, &r)
	return r
}

// reconcileDraining reports the draining units that are gone or failed.
func (f *fleet) reconcileDraining(byUnit unitIndex, r *reconciled) {
	for _, name := range sortedKeys(f.draining) {
		d := f.draining[name]
		w, ok := byUnit.get(name)
		switch st := classify(w, ok); {
		case st == stateGone:
			result := "success"
			if ok && w.Result != "" {
				result = w.Result
			}
			if !d.rank {
				r.stopped = append(r.stopped, stopped{unit: name, slot: d.slot, ours: d.ours, result: result, exit: w})
			}
			delete(f.draining, name)
		case st == stateFailed:
			if !d.rank {
				r.stopped = append(r.stopped, stopped{unit: name, slot: d.slot, ours: d.ours, result: w.Result, exit: w})
			}
			r.resets = appendNew(r.resets, name)
			delete(f.draining, name)
		case st == stateRunning && !d.ours:
			// Seen stopping, now running again: an admin's restart.
			// adoptListed adopts it as live.
			delete(f.draining, name)
		}
	}
}

// reconcileLive follows the live workers: still running, restarted behind
// the pool's back, being stopped from outside, or crashed.
func (f *fleet) reconcileLive(now time.Time, byUnit unitIndex, r *reconciled) {
	for _, slot := range sortedKeys(f.live) {
		lw := f.live[slot]
		w, ok := byUnit.get(lw.unit)
		if !ok && f.asOf != 0 && lw.listedFrom > f.asOf {
			continue // started after the listing began
		}
		st := classify(w, ok)
		if e, broken := brokenGroup(lw, w, st); broken {
			f.breakGroup(now, lw, w, e, r)
			continue
		}
		switch {
		case st == stateRunning && (lw.invocation == "" || w.InvocationID == "" || w.InvocationID == lw.invocation):
			if w.InvocationID != "" {
				lw.invocation = w.InvocationID
			}
			if rev := w.Revision; rev != "" {
				lw.revision = rev
			}
		case st == stateRunning:
			lw.invocation, lw.since, lw.havePrev = w.InvocationID, startedAt(w, now), false
			lw.revision = w.Revision
			r.restarted = append(r.restarted, restarted{lw})
		case st == stateStopping:
			delete(f.live, slot)
			f.draining[lw.unit] = drainingUnit{slot: slot}
			r.stopping = append(r.stopping, stopping{lw})
		default:
			delete(f.live, slot)
			// A worker that stayed up long enough earns its slot a fresh
			// backoff.
			if !lw.since.IsZero() && now.Sub(lw.since) >= backoffReset {
				delete(f.backoff, slot)
			}
			c := crash{worker: lw, unit: w, loaded: st == stateFailed, delay: f.armBackoff(slot, now)}
			if lw.size > 1 {
				if e, found := groupExit(lw.unit, w, ok, lw.size); found {
					c.exit = &e
				}
			}
			r.crashed = append(r.crashed, c)
			if st == stateFailed {
				r.resets = append(r.resets, lw.unit)
			}
		}
	}
}

// adoptListed takes in the listed units the fleet does not know: running
// ones become live, stopping ones draining, failed ones are reset.
func (f *fleet) adoptListed(now time.Time, listed []units.Worker, r *reconciled) {
	for _, w := range listed {
		if _, ok := f.draining[w.Unit]; ok {
			continue
		}
		if lw, ok := f.live[w.Slot]; ok && lw.unit == w.Unit {
			continue
		}
		if _, ok := f.starting[w.Slot]; ok {
			continue // its start's result says what it is
		}
		switch classify(w, true) {
		case stateRunning:
			lw := &worker{slot: w.Slot, unit: w.Unit, invocation: w.InvocationID,
				revision: w.Revision, since: startedAt(w, now), size: listedGroupSize(w)}
			f.live[w.Slot] = lw
			r.adopted = append(r.adopted, lw)
		case stateStopping:
			// Stopping when we first see it: our own drain before a
			// restart of the daemon, or an admin's stop.
			f.draining[w.Unit] = drainingUnit{slot: w.Slot}
		case stateFailed:
			if !slices.Contains(r.resets, w.Unit) {
				r.resets = append(r.resets, w.Unit)
			}
		}
	}
}

// startedAt is when a listed worker became active, on the controller's
// clock, or now if systemd does not say.
func startedAt(w units.Worker, now time.Time) time.Time {
	if w.ActiveEnterMono > 0 {
		return monoTime(w.ActiveEnterMono)
	}
	return now
}

// armBackoff keeps slot from being started again for a while after a crash
// or a failed start: 1 s, doubling with each failure in a row, up to 60 s.
// It returns the delay.
func (f *fleet) armBackoff(slot int, now time.Time) time.Duration {
	b := f.backoff[slot]
	if b == nil {
		b = &slotBackoff{}
		f.backoff[slot] = b
	}
	b.failures++
	b.delay = min(max(b.delay*2, backoffMin), backoffMax)
	b.until = now.Add(b.delay)
	return b.delay
}

// stop moves a live worker to draining, as we have asked systemd to stop it.
func (f *fleet) stop(w *worker) {
	delete(f.live, w.slot)
	f.draining[w.unit] = drainingUnit{slot: w.slot, ours: true, ports: w.ports}
}

// unstop undoes stop, for a stop that systemd refused.
func (f *fleet) unstop(w *worker) {
	if d, ok := f.draining[w.unit]; ok && d.ours && f.live[w.slot] == nil {
		delete(f.draining, w.unit)
		f.live[w.slot] = w
	}
}

// freeSlots returns the slots to start up to n workers in.
func (f *fleet) freeSlots(now time.Time, n int, taken map[int]bool) []int {
	busy := map[int]bool{}
	for slot := range f.live {
		busy[slot] = true
	}
	for slot := range f.starting {
		busy[slot] = true
	}
	for slot := range f.taken {
		busy[slot] = true
	}
	backingOff := map[int]bool{}
	for slot, b := range f.backoff {
		backingOff[slot] = now.Before(b.until)
	}
	for _, d := range f.draining {
		// The last ranks of a crashed group hold its slot, but not its
		// place while it backs off: a crash loop must not move on to the
		// next slot to dodge its backoff.
		busy[d.slot] = busy[d.slot] || !d.rank || !backingOff[d.slot]
	}
	for slot := range taken {
		busy[slot] = true
	}
	return pickSlots(busy, backingOff, n)
}

// pickSlots chooses n slots, lowest first, among those not busy (live or
// draining). A slot that is backing off keeps its place: it counts towards
// the n but gets no start, so a crash loop cannot dodge its backoff by moving
// on to the next slot number.
func pickSlots(busy, backingOff map[int]bool, n int) []int {
	var slots []int
	for slot := 1; n > 0; slot++ {
		if busy[slot] {
			continue
		}
		n--
		if !backingOff[slot] {
			slots = append(slots, slot)
		}
	}
	return slots
}

// pickVictims chooses the n workers to stop, in policy.VictimBefore's
// order, which the workload simulator shares.
func pickVictims(ws []*worker, n int, revision string) []*worker {
	ws = slices.Clone(ws)
	sort.Slice(ws, func(i, j int) bool {
		return policy.VictimBefore(victim(ws[i], revision), victim(ws[j], revision))
	})
	return ws[:max(0, min(n, len(ws)))]
}

// victim is what the victim order looks at.
func victim(w *worker, revision string) policy.Victim {
	return policy.Victim{Slot: w.slot, Util: w.util, Outdated: outdated(w, revision)}
}

// outdated says whether w runs another definition than revision. A worker
// whose revision is unknown (started by a daemon that did not record it) is
// taken as current: an upgrade of the daemon must not replace every worker.
func outdated(w *worker, revision string) bool {
	return w.revision != "" && revision != "" && w.revision != revision
}

// drainingSlots counts the slots that draining units hold: a gang group's
// units holding one slot are one draining worker.
func (f *fleet) drainingSlots() int {
	slots := make(map[int]bool, len(f.draining))
	for _, d := range f.draining {
		slots[d.slot] = true
	}
	return len(slots)
}

func (f *fleet) liveWorkers() []*worker {
	ws := make([]*worker, 0, len(f.live))
	for _, slot := range sortedKeys(f.live) {
		ws = append(ws, f.live[slot])
	}
	return ws
}

// unitIndex finds a listed worker, or a rank of a gang group, by its
// unit's name. It keeps positions in the listing, not copies: a map of
// Worker values built at every tick was 130 KB of garbage per tick at 500
// workers.
type unitIndex struct {
	listed []units.Worker
	at     map[string]int
	// ranks: a rank's rank 0's index in listed, and its index in Ranks;
	// nil when no group is listed.
	ranks map[string][2]int
}

func indexByUnit(listed []units.Worker) unitIndex {
	x := unitIndex{listed: listed, at: make(map[string]int, len(listed))}
	for i, w := range listed {
		x.at[w.Unit] = i
		for j, rk := range w.Ranks {
			if x.ranks == nil {
				x.ranks = map[string][2]int{}
			}
			x.ranks[rk.Unit] = [2]int{i, j}
		}
	}
	return x
}

func (x unitIndex) get(unit string) (units.Worker, bool) {
	if i, ok := x.at[unit]; ok {
		return x.listed[i], true
	}
	if p, ok := x.ranks[unit]; ok {
		return x.listed[p[0]].Ranks[p[1]], true
	}
	return units.Worker{}, false
}

func sortedKeys[K int | string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
