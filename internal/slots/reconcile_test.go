package slots

import (
	"slices"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
)

// tw is a test's worker: the table's fields and nothing else.
type tw struct {
	slot             int
	unit, inv, rev   string
	since            time.Time
	size             int
	listedFrom       uint64
	restarts, listed int
}

func (w *tw) Slot() int          { return w.slot }
func (w *tw) Unit() string       { return w.unit }
func (w *tw) Invocation() string { return w.inv }
func (w *tw) Since() time.Time   { return w.since }
func (w *tw) Size() int          { return w.size }
func (w *tw) ListedFrom() uint64 { return w.listedFrom }
func (w *tw) Listed(inv, rev string) {
	w.listed++
	if inv != "" {
		w.inv = inv
	}
	if rev != "" {
		w.rev = rev
	}
}
func (w *tw) Restarted(inv, rev string, since time.Time) {
	w.restarts++
	w.inv, w.rev, w.since = inv, rev, since
}

func newTable() *Table[*tw] {
	return New(func(w units.Worker, since time.Time, size int) *tw {
		return &tw{slot: w.Slot, unit: w.Unit, inv: w.InvocationID, rev: w.Revision, since: since, size: size}
	})
}

func unit(slot int) string { return units.UnitName("p", slot) }

func listed(slot int, state, inv string) units.Worker {
	return units.Worker{Unit: unit(slot), Pool: "p", Slot: slot, ActiveState: state, InvocationID: inv}
}

func live(t *Table[*tw], slot int, inv string, since time.Time) *tw {
	w := &tw{slot: slot, unit: unit(slot), inv: inv, since: since}
	t.Live[slot] = w
	return w
}

// TestReconcile: what a listing does to each kind of slot, and what it
// reports.
func TestReconcile(t *testing.T) {
	now := time.Unix(10_000, 0)
	type want struct {
		live, draining                        []string // units, sorted
		crashed, stopped, stopping, restarted int
		adopted                               int
		resets                                []string
		backoff                               time.Duration // slot 1's, 0 for none
	}
	for _, tc := range []struct {
		name    string
		setup   func(*Table[*tw])
		listing []units.Worker
		want    want
	}{
		{"a live worker still running stays", func(t *Table[*tw]) { live(t, 1, "a", now) },
			[]units.Worker{listed(1, "active", "a")}, want{live: []string{unit(1)}}},
		{"a live worker gone crashed, its slot backs off", func(t *Table[*tw]) { live(t, 1, "a", now) },
			nil, want{crashed: 1, backoff: time.Second}},
		{"a failed one crashed and is reset", func(t *Table[*tw]) { live(t, 1, "a", now) },
			[]units.Worker{listed(1, "failed", "a")}, want{crashed: 1, resets: []string{unit(1)}, backoff: time.Second}},
		{"a second crash in a row doubles the backoff", func(t *Table[*tw]) {
			live(t, 1, "a", now)
			t.Backoff[1] = &Backoff{Delay: 4 * time.Second, Failures: 3}
		}, nil, want{crashed: 1, backoff: 8 * time.Second}},
		{"a crash after a long run starts the backoff over", func(t *Table[*tw]) {
			live(t, 1, "a", now.Add(-BackoffReset))
			t.Backoff[1] = &Backoff{Delay: 32 * time.Second, Failures: 6}
		}, nil, want{crashed: 1, backoff: time.Second}},
		{"the backoff stops at its ceiling", func(t *Table[*tw]) {
			live(t, 1, "a", now)
			t.Backoff[1] = &Backoff{Delay: BackoffMax}
		}, nil, want{crashed: 1, backoff: BackoffMax}},
		{"a new invocation is a restart from outside", func(t *Table[*tw]) { live(t, 1, "a", now) },
			[]units.Worker{listed(1, "active", "b")}, want{live: []string{unit(1)}, restarted: 1}},
		{"deactivating is a stop from outside: draining", func(t *Table[*tw]) { live(t, 1, "a", now) },
			[]units.Worker{listed(1, "deactivating", "a")}, want{draining: []string{unit(1)}, stopping: 1}},
		{"a draining unit gone is stopped", func(t *Table[*tw]) { t.Draining[unit(1)] = Draining{Slot: 1, Ours: true} },
			nil, want{stopped: 1}},
		{"a draining unit still stopping stays", func(t *Table[*tw]) { t.Draining[unit(1)] = Draining{Slot: 1, Ours: true} },
			[]units.Worker{listed(1, "deactivating", "a")}, want{draining: []string{unit(1)}}},
		{"a draining unit failed is stopped and reset", func(t *Table[*tw]) { t.Draining[unit(1)] = Draining{Slot: 1, Ours: true} },
			[]units.Worker{listed(1, "failed", "a")}, want{stopped: 1, resets: []string{unit(1)}}},
		{"an admin's stop undone: running again, adopted", func(t *Table[*tw]) { t.Draining[unit(1)] = Draining{Slot: 1} },
			[]units.Worker{listed(1, "active", "a")}, want{live: []string{unit(1)}, adopted: 1}},
		{"our stop still running stays draining", func(t *Table[*tw]) { t.Draining[unit(1)] = Draining{Slot: 1, Ours: true} },
			[]units.Worker{listed(1, "active", "a")}, want{draining: []string{unit(1)}}},
		{"an unknown running unit is adopted", func(*Table[*tw]) {},
			[]units.Worker{listed(3, "activating", "a")}, want{live: []string{unit(3)}, adopted: 1}},
		{"an unknown stopping unit is draining", func(*Table[*tw]) {},
			[]units.Worker{listed(3, "deactivating", "a")}, want{draining: []string{unit(3)}}},
		{"an unknown failed unit is reset", func(*Table[*tw]) {},
			[]units.Worker{listed(3, "failed", "a")}, want{resets: []string{unit(3)}}},
		{"a slot whose start is in flight is not adopted", func(t *Table[*tw]) { t.Starting[2] = &tw{slot: 2, unit: unit(2)} },
			[]units.Worker{listed(2, "active", "a")}, want{}},
		{"a worker started after the listing began is not judged by it", func(t *Table[*tw]) {
			live(t, 1, "a", now).listedFrom = 5
			t.AsOf = 4
		}, nil, want{live: []string{unit(1)}}},
		{"a listing that judges all (AsOf 0) judges it too", func(t *Table[*tw]) {
			live(t, 1, "a", now).listedFrom = 5
		}, nil, want{crashed: 1, backoff: time.Second}},
		{"a slot in flight listed, its start done meanwhile: adopted", func(t *Table[*tw]) { t.AsOf = 4 },
			[]units.Worker{listed(2, "active", "a")}, want{live: []string{unit(2)}, adopted: 1}},
		{"one started before it is", func(t *Table[*tw]) {
			live(t, 1, "a", now).listedFrom = 5
			t.AsOf = 5
		}, nil, want{crashed: 1, backoff: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTable()
			tc.setup(tb)
			r := tb.Reconcile(now, tc.listing)
			var got want
			for _, w := range tb.LiveWorkers() {
				got.live = append(got.live, w.unit)
			}
			got.draining = SortedKeys(tb.Draining)
			got.crashed, got.stopped, got.stopping = len(r.Crashed), len(r.Stopped), len(r.Stopping)
			got.restarted, got.adopted, got.resets = len(r.Restarted), len(r.Adopted), r.Resets
			if b := tb.Backoff[1]; b != nil {
				got.backoff = b.Delay
				if !b.Until.Equal(now.Add(b.Delay)) {
					t.Errorf("backoff until %v, want now + %v", b.Until, b.Delay)
				}
			}
			if !slices.Equal(got.live, tc.want.live) || !slices.Equal(got.draining, tc.want.draining) ||
				!slices.Equal(got.resets, tc.want.resets) || got.crashed != tc.want.crashed || got.stopped != tc.want.stopped ||
				got.stopping != tc.want.stopping || got.restarted != tc.want.restarted || got.adopted != tc.want.adopted ||
				got.backoff != tc.want.backoff {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
			for _, c := range r.Crashed {
				if c.Delay != tb.Backoff[c.Worker.slot].Delay {
					t.Errorf("crash of slot %d reports a %v backoff, the slot has %v", c.Worker.slot, c.Delay, tb.Backoff[c.Worker.slot].Delay)
				}
			}
		})
	}
}

// A restart from outside is the worker's new run: invocation, revision and
// start time are the listing's.
func TestReconcileRestartTakesTheNewRun(t *testing.T) {
	now := time.Unix(10_000, 0)
	tb := newTable()
	w := live(tb, 1, "a", now.Add(-time.Hour))
	l := listed(1, "active", "b")
	l.Revision, l.ActiveEnterMono = "r2", 42*time.Second
	tb.Reconcile(now, []units.Worker{l})
	if w.restarts != 1 || w.inv != "b" || w.rev != "r2" || !w.since.Equal(MonoTime(42*time.Second)) {
		t.Errorf("after a restart: %+v", w)
	}
}

// TestFreeSlots: the lowest slots not held by a live worker, a start in
// flight, a draining unit or a slot found taken; a slot backing off keeps
// its place without a start.
func TestFreeSlots(t *testing.T) {
	now := time.Unix(10_000, 0)
	for _, tc := range []struct {
		name  string
		setup func(*Table[*tw])
		n     int
		taken []int
		want  []int
	}{
		{"empty", func(*Table[*tw]) {}, 2, nil, []int{1, 2}},
		{"live, starting and draining slots are busy", func(t *Table[*tw]) {
			live(t, 1, "a", now)
			t.Starting[2] = &tw{slot: 2}
			t.Draining[unit(3)] = Draining{Slot: 3}
		}, 2, nil, []int{4, 5}},
		{"a slot found taken waits for the next listing", func(t *Table[*tw]) { t.Take(1) }, 1, nil, []int{2}},
		{"the caller's taken too", func(*Table[*tw]) {}, 1, []int{1, 2}, []int{3}},
		{"a slot backing off keeps its place", func(t *Table[*tw]) { t.Backoff[1] = &Backoff{Until: now.Add(time.Second)} }, 2, nil, []int{2}},
		{"an expired backoff does not hold", func(t *Table[*tw]) { t.Backoff[1] = &Backoff{Until: now} }, 1, nil, []int{1}},
		{"a crashed group's last ranks do not move its place while it backs off", func(t *Table[*tw]) {
			t.Draining[units.RankUnitName("p", 1, 1)] = Draining{Slot: 1, Ours: true, Rank: true}
			t.Backoff[1] = &Backoff{Until: now.Add(time.Second)}
		}, 1, nil, nil},
		{"once it is over, they hold the slot", func(t *Table[*tw]) {
			t.Draining[units.RankUnitName("p", 1, 1)] = Draining{Slot: 1, Ours: true, Rank: true}
		}, 1, nil, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTable()
			tc.setup(tb)
			if got := tb.FreeSlots(now, tc.n, set(tc.taken)); !slices.Equal(got, tc.want) {
				t.Errorf("FreeSlots = %v, want %v", got, tc.want)
			}
		})
	}
}

// A listing clears the slots found taken: it says what holds them.
func TestReconcileClearsTaken(t *testing.T) {
	tb := newTable()
	tb.Take(1)
	tb.Reconcile(time.Unix(1, 0), nil)
	if got := tb.FreeSlots(time.Unix(1, 0), 1, nil); !slices.Equal(got, []int{1}) {
		t.Errorf("FreeSlots after a listing = %v, want [1]", got)
	}
}

// Stop drains a live worker, holding its ports; Unstop, for a stop
// systemd refused, makes it live again unless its slot was taken since.
func TestStopUnstop(t *testing.T) {
	for _, tc := range []struct {
		name        string
		refilled    bool // the slot has a live worker again
		wantLive    bool
		wantDrained bool
	}{
		{"refused: live again", false, true, false},
		{"its slot taken meanwhile: stays draining", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTable()
			w := live(tb, 1, "a", time.Unix(1, 0))
			tb.Stop(w, map[string]int{"http": 8080})
			if d := tb.Draining[unit(1)]; !d.Ours || d.Slot != 1 || d.Ports["http"] != 8080 || tb.Live[1] != nil || tb.DrainingSlots() != 1 {
				t.Fatalf("after Stop: draining %+v, live %v", d, tb.Live)
			}
			if tc.refilled {
				tb.Live[1] = &tw{slot: 1, unit: "other"}
			}
			tb.Unstop(w)
			if (tb.Live[1] == w) != tc.wantLive {
				t.Errorf("live %v, want %v", tb.Live[1] == w, tc.wantLive)
			}
			if _, ok := tb.Draining[unit(1)]; ok != tc.wantDrained {
				t.Errorf("draining %v, want %v", ok, tc.wantDrained)
			}
		})
	}
}

// A gang group's units on one slot are one draining worker.
func TestDrainingSlots(t *testing.T) {
	tb := newTable()
	tb.Draining[unit(1)] = Draining{Slot: 1}
	tb.Draining[units.RankUnitName("p", 1, 1)] = Draining{Slot: 1, Rank: true}
	tb.Draining[unit(2)] = Draining{Slot: 2}
	if n := tb.DrainingSlots(); n != 2 {
		t.Errorf("DrainingSlots = %d, want 2", n)
	}
}
