// Package slots is a pool's worker-slot table: which slot holds a live
// worker, which a start in flight, which a unit still draining, which is
// backing off after a crash. It does no I/O: Reconcile turns a listing of
// the pool's units into events that the pool reports and acts on, and the
// pool tells it of the starts and stops it emits.
//
// The table keeps the pool's own workers (W): it reads and updates what a
// slot needs of them through the Worker interface, and leaves the rest (CPU
// accounting, a replica's ports and readiness) to the pool.
package slots

import (
	"slices"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Crash backoff per slot: 1 s doubling to 60 s, so that a crash loop never
// spins. A worker that stayed up this long before crashing starts over at 1 s.
const (
	BackoffMin   = time.Second
	BackoffMax   = 60 * time.Second
	BackoffReset = 60 * time.Second
)

// Worker is what the table needs of a live worker.
type Worker interface {
	comparable
	Slot() int
	Unit() string
	Invocation() string
	// Since is when it became active, on the controller's clock.
	Since() time.Time
	// Size is its ranks when it is a gang group, else 0 or 1.
	Size() int
	// ListedFrom is the first listing (Table.Listings) begun after its
	// start ended: an earlier one may not show it yet.
	ListedFrom() uint64
	// Listed takes in a listing that shows it running as it was; an
	// empty invocation or revision says nothing.
	Listed(invocation, revision string)
	// Restarted takes in a listing that shows it running a new
	// invocation: it was restarted behind the pool's back.
	Restarted(invocation, revision string, since time.Time)
}

// Draining is a unit on its way out: stopped by us, or seen deactivating
// (an admin's systemctl stop, or our own drain before a restart). Its slot
// stays taken until systemd reports the unit gone, however long that takes.
type Draining struct {
	Slot  int
	Ours  bool           // we asked for the stop
	Ports map[string]int // a replica's, held until it is gone
	// Rank: a unit of a gang group that has ended, held until systemd is
	// done with it; its end is not reported, the group's was.
	Rank bool
}

// Backoff keeps a slot from being started again for a while.
type Backoff struct {
	Delay time.Duration
	Until time.Time
	// Failures counts the slot's crashes and failed starts in a row: a
	// worker that stays up BackoffReset starts the count over.
	Failures int
}

// Table is the pool's record of its units, as of the last listing and the
// starts and stops since.
type Table[W Worker] struct {
	Live     map[int]W
	Draining map[string]Draining // by unit name
	Backoff  map[int]*Backoff
	// Starting are the workers whose start is in flight, by the slot
	// reserved for them.
	Starting map[int]W
	// taken are slots whose unit a start found still there, until the
	// next listing says what holds them.
	taken map[int]bool
	// Listings numbers the listings begun; AsOf is the one being
	// reconciled, 0 for a listing that judges every worker (one made
	// while no start was in flight).
	Listings, AsOf uint64
	// adopt makes the worker of a running unit the table did not know.
	adopt func(w units.Worker, since time.Time, size int) W
}

// New makes an empty table; adopt makes the pool's worker of a running
// unit that a listing shows and the table did not know.
func New[W Worker](adopt func(w units.Worker, since time.Time, size int) W) *Table[W] {
	return &Table[W]{Live: map[int]W{}, Draining: map[string]Draining{}, Backoff: map[int]*Backoff{},
		Starting: map[int]W{}, taken: map[int]bool{}, adopt: adopt}
}

// State classifies a listed unit.
type State int

const (
	Gone     State = iota // not listed, or inactive: systemd is done with it
	Running               // active, activating or reloading
	Stopping              // deactivating: its stop is under way
	Failed                // failed: kept loaded for its Result until reset
)

// Classify says what state a listed unit is in; listed false is Gone.
func Classify(w units.Worker, listed bool) State {
	if !listed {
		return Gone
	}
	switch w.ActiveState {
	case "active", "activating", "reloading":
		return Running
	case "deactivating":
		return Stopping
	case "failed":
		return Failed
	}
	return Gone
}

// Events that Reconcile reports.
type (
	// Crash: a live worker stopped without being asked.
	Crash[W Worker] struct {
		Worker W
		Unit   units.Worker // as listed; zero if it was unloaded
		Loaded bool
		Delay  time.Duration // the slot's backoff
		// Exit is the rank that ended a gang group; nil for a single
		// unit.
		Exit *RankExit
	}
	// Stopped: a draining unit is gone.
	Stopped struct {
		Unit   string
		Slot   int
		Ours   bool
		Result string // the unit's Result: "success" when it was unloaded cleanly
		Exit   units.Worker
	}
	// StoppingOutside: a live worker is being stopped by someone else.
	StoppingOutside[W Worker] struct{ Worker W }
	// Restarted: a live worker was restarted behind our back (new invocation).
	Restarted[W Worker] struct{ Worker W }
)

// Reconciled is what a listing changed.
type Reconciled[W Worker] struct {
	Crashed   []Crash[W]
	Stopped   []Stopped
	Stopping  []StoppingOutside[W]
	Restarted []Restarted[W]
	Adopted   []W
	// Resets are failed units to reset, so that systemd unloads them and
	// their names can be used again.
	Resets []string
	// Stops are units to stop: the ranks of a gang group that has lost
	// one, should systemd's own binding not have stopped them already.
	Stops []string
}

// Reconcile brings the table in line with a listing of the pool's units:
// the draining units first, then the live workers, then the units it did
// not know.
func (t *Table[W]) Reconcile(now time.Time, listed []units.Worker) Reconciled[W] {
	var r Reconciled[W]
	clear(t.taken)
	byUnit := IndexByUnit(listed)
	t.reconcileDraining(byUnit, &r)
	t.reconcileLive(now, byUnit, &r)
	t.adoptListed(now, listed, &r)
	t.holdRanks(listed, &r)
	return r
}

// reconcileDraining reports the draining units that are gone or failed.
func (t *Table[W]) reconcileDraining(byUnit Index, r *Reconciled[W]) {
	for _, name := range SortedKeys(t.Draining) {
		d := t.Draining[name]
		w, ok := byUnit.Get(name)
		switch st := Classify(w, ok); {
		case st == Gone:
			result := "success"
			if ok && w.Result != "" {
				result = w.Result
			}
			if !d.Rank {
				r.Stopped = append(r.Stopped, Stopped{Unit: name, Slot: d.Slot, Ours: d.Ours, Result: result, Exit: w})
			}
			delete(t.Draining, name)
		case st == Failed:
			if !d.Rank {
				r.Stopped = append(r.Stopped, Stopped{Unit: name, Slot: d.Slot, Ours: d.Ours, Result: w.Result, Exit: w})
			}
			r.Resets = appendNew(r.Resets, name)
			delete(t.Draining, name)
		case st == Running && !d.Ours:
			// Seen stopping, now running again: an admin's restart.
			// adoptListed adopts it as live.
			delete(t.Draining, name)
		}
	}
}

// reconcileLive follows the live workers: still running, restarted behind
// the pool's back, being stopped from outside, or crashed.
func (t *Table[W]) reconcileLive(now time.Time, byUnit Index, r *Reconciled[W]) {
	for _, slot := range SortedKeys(t.Live) {
		lw := t.Live[slot]
		w, ok := byUnit.Get(lw.Unit())
		if !ok && t.AsOf != 0 && lw.ListedFrom() > t.AsOf {
			continue // started after the listing began
		}
		st := Classify(w, ok)
		if e, broken := brokenGroup(lw, w, st); broken {
			t.breakGroup(now, lw, w, e, r)
			continue
		}
		switch {
		case st == Running && (lw.Invocation() == "" || w.InvocationID == "" || w.InvocationID == lw.Invocation()):
			lw.Listed(w.InvocationID, w.Revision)
		case st == Running:
			lw.Restarted(w.InvocationID, w.Revision, startedAt(w, now))
			r.Restarted = append(r.Restarted, Restarted[W]{lw})
		case st == Stopping:
			delete(t.Live, slot)
			t.Draining[lw.Unit()] = Draining{Slot: slot}
			r.Stopping = append(r.Stopping, StoppingOutside[W]{lw})
		default:
			delete(t.Live, slot)
			t.forgiveLongRun(now, lw)
			c := Crash[W]{Worker: lw, Unit: w, Loaded: st == Failed, Delay: t.ArmBackoff(slot, now)}
			if lw.Size() > 1 {
				if e, found := GroupExit(lw.Unit(), w, ok, lw.Size()); found {
					c.Exit = &e
				}
			}
			r.Crashed = append(r.Crashed, c)
			if st == Failed {
				r.Resets = append(r.Resets, lw.Unit())
			}
		}
	}
}

// forgiveLongRun gives the slot of a worker that stayed up long enough a
// fresh backoff.
func (t *Table[W]) forgiveLongRun(now time.Time, lw W) {
	if !lw.Since().IsZero() && now.Sub(lw.Since()) >= BackoffReset {
		delete(t.Backoff, lw.Slot())
	}
}

// adoptListed takes in the listed units the table does not know: running
// ones become live, stopping ones draining, failed ones are reset.
func (t *Table[W]) adoptListed(now time.Time, listed []units.Worker, r *Reconciled[W]) {
	for _, w := range listed {
		if _, ok := t.Draining[w.Unit]; ok {
			continue
		}
		if lw, ok := t.Live[w.Slot]; ok && lw.Unit() == w.Unit {
			continue
		}
		if _, ok := t.Starting[w.Slot]; ok {
			continue // its start's result says what it is
		}
		switch Classify(w, true) {
		case Running:
			lw := t.adopt(w, startedAt(w, now), ListedGroupSize(w))
			t.Live[w.Slot] = lw
			r.Adopted = append(r.Adopted, lw)
		case Stopping:
			// Stopping when we first see it: our own drain before a
			// restart of the daemon, or an admin's stop.
			t.Draining[w.Unit] = Draining{Slot: w.Slot}
		case Failed:
			if !slices.Contains(r.Resets, w.Unit) {
				r.Resets = append(r.Resets, w.Unit)
			}
		}
	}
}

// startedAt is when a listed worker became active, on the controller's
// clock, or now if systemd does not say.
func startedAt(w units.Worker, now time.Time) time.Time {
	if w.ActiveEnterMono > 0 {
		return MonoTime(w.ActiveEnterMono)
	}
	return now
}

// MonoTime is a CLOCK_MONOTONIC reading as a time on the controller's
// clock, which counts from the epoch.
func MonoTime(d time.Duration) time.Time { return time.Unix(0, 0).Add(d) }

// ArmBackoff keeps slot from being started again for a while after a crash
// or a failed start: 1 s, doubling with each failure in a row, up to 60 s.
// It returns the delay.
func (t *Table[W]) ArmBackoff(slot int, now time.Time) time.Duration {
	b := t.Backoff[slot]
	if b == nil {
		b = &Backoff{}
		t.Backoff[slot] = b
	}
	b.Failures++
	b.Delay = min(max(b.Delay*2, BackoffMin), BackoffMax)
	b.Until = now.Add(b.Delay)
	return b.Delay
}

// Stop moves a live worker to draining, as we have asked systemd to stop
// it; ports are a replica's, held until the unit is gone.
func (t *Table[W]) Stop(w W, ports map[string]int) {
	delete(t.Live, w.Slot())
	t.Draining[w.Unit()] = Draining{Slot: w.Slot(), Ours: true, Ports: ports}
}

// Unstop undoes Stop, for a stop that systemd refused.
func (t *Table[W]) Unstop(w W) {
	if d, ok := t.Draining[w.Unit()]; ok && d.Ours {
		if _, live := t.Live[w.Slot()]; !live {
			delete(t.Draining, w.Unit())
			t.Live[w.Slot()] = w
		}
	}
}

// Take marks a slot whose unit a start found still there: no start takes
// it until the next listing says what holds it.
func (t *Table[W]) Take(slot int) { t.taken[slot] = true }

// FreeSlots returns the slots to start up to n workers in, besides those
// in taken.
func (t *Table[W]) FreeSlots(now time.Time, n int, taken map[int]bool) []int {
	busy := map[int]bool{}
	for slot := range t.Live {
		busy[slot] = true
	}
	for slot := range t.Starting {
		busy[slot] = true
	}
	for slot := range t.taken {
		busy[slot] = true
	}
	backingOff := map[int]bool{}
	for slot, b := range t.Backoff {
		backingOff[slot] = now.Before(b.Until)
	}
	for _, d := range t.Draining {
		// The last ranks of a crashed group hold its slot, but not its
		// place while it backs off: a crash loop must not move on to the
		// next slot to dodge its backoff.
		busy[d.Slot] = busy[d.Slot] || !d.Rank || !backingOff[d.Slot]
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

// DrainingSlots counts the slots that draining units hold: a gang group's
// units holding one slot are one draining worker.
func (t *Table[W]) DrainingSlots() int {
	slots := make(map[int]bool, len(t.Draining))
	for _, d := range t.Draining {
		slots[d.Slot] = true
	}
	return len(slots)
}

// LiveWorkers are the live workers, by slot.
func (t *Table[W]) LiveWorkers() []W {
	ws := make([]W, 0, len(t.Live))
	for _, slot := range SortedKeys(t.Live) {
		ws = append(ws, t.Live[slot])
	}
	return ws
}

// Index finds a listed worker, or a rank of a gang group, by its unit's
// name. It keeps positions in the listing, not copies: a map of Worker
// values built at every tick was 130 KB of garbage per tick at 500
// workers.
type Index struct {
	listed []units.Worker
	at     map[string]int
	// ranks: a rank's rank 0's index in listed, and its index in Ranks;
	// nil when no group is listed.
	ranks map[string][2]int
}

// IndexByUnit indexes a listing.
func IndexByUnit(listed []units.Worker) Index {
	x := Index{listed: listed, at: make(map[string]int, len(listed))}
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

// Get is the listed unit, or rank, named unit.
func (x Index) Get(unit string) (units.Worker, bool) {
	if i, ok := x.at[unit]; ok {
		return x.listed[i], true
	}
	if p, ok := x.ranks[unit]; ok {
		return x.listed[p[0]].Ranks[p[1]], true
	}
	return units.Worker{}, false
}

// SortedKeys are m's keys in order, for a walk that reports in a stable
// order.
func SortedKeys[K int | string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
