package slots

// Gang groups (issue 19): a worker (a slot) of N units, ranks 0 … N-1,
// that systemd starts in one transaction and binds together. Rank 0 stands
// for its group in the table; what this file adds is reading a group's end
// out of a listing (the rank that exited, for the one crash event of the
// group) and holding the slot while units of a group outlive its rank 0.

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// ListedGroupSize is the group size of a listed worker: its
// FLEXIQ_GROUP_SIZE when its environment was read, else its ranks as
// listed. A worker started before its pool had groups is a group of one.
func ListedGroupSize(w units.Worker) int {
	for _, kv := range w.Environment {
		if v, ok := strings.CutPrefix(kv, config.GroupSizeEnv+"="); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 1 {
				return n
			}
		}
	}
	return 1 + len(w.Ranks)
}

// RankExit is the rank whose end broke a gang group.
type RankExit struct {
	Rank   int // -1: no rank is left loaded to tell
	Unit   string
	W      units.Worker // as listed; zero when not listed
	Loaded bool
}

// GroupExit finds, in the listing of the group whose rank 0 is the unit
// rank0 (w, with its Ranks; zero and listed false when rank 0 is not
// listed), the rank that ended it: the failed one that went down first
// (units.FirstFailed), else one that is gone (it exited and was
// unloaded), else one that is stopping. ok is false while every rank
// runs. When every rank is gone, there is no telling which exited first:
// Rank is -1.
func GroupExit(rank0 string, w units.Worker, listed bool, size int) (RankExit, bool) {
	pool, slot, _ := units.ParseUnitName(rank0)
	byRank := make([]*units.Worker, size)
	if own, ok := ownRank0(w, listed); ok {
		byRank[0] = &own
	}
	for i := range w.Ranks {
		if r := w.Ranks[i].Rank; r > 0 && r < size {
			byRank[r] = &w.Ranks[i]
		}
	}
	state := func(r int) State {
		if byRank[r] == nil {
			return Gone
		}
		return Classify(*byRank[r], true)
	}
	var up []units.Worker // the ranks not gone, each with its rank
	for r, rk := range byRank {
		if state(r) != Gone {
			up = append(up, *rk)
			up[len(up)-1].Rank = r
		}
	}
	if len(up) == 0 {
		return RankExit{Rank: -1}, true
	}
	exit := func(r int) (RankExit, bool) {
		e := RankExit{Rank: r, Unit: rankUnit(pool, slot, r)}
		if byRank[r] != nil {
			e.W, e.Loaded = *byRank[r], state(r) != Gone
		}
		return e, true
	}
	if i := units.FirstFailed(up); i >= 0 {
		return exit(up[i].Rank)
	}
	for _, down := range []State{Gone, Stopping} {
		for r := range byRank {
			if state(r) == down {
				return exit(r)
			}
		}
	}
	return RankExit{}, false
}

// ownRank0 is rank 0 of a listed group as its own unit, not as the group
// it speaks for in a listing (units.Worker.Ranks: there its states are
// the group's, and its Result and exit those of the rank that failed
// first, which are not rank 0's and are blanked here). ok is false when
// rank 0 is not loaded.
func ownRank0(w units.Worker, listed bool) (units.Worker, bool) {
	if !listed || w.Missing {
		return units.Worker{}, false
	}
	own := w
	own.Ranks = nil
	if len(w.Ranks) > 0 && w.UnitActiveState != "" {
		own.ActiveState, own.SubState = w.UnitActiveState, w.UnitSubState
		if w.ActiveState == "failed" && w.FailedRank != 0 {
			own.Result, own.ExecMainCode, own.ExecMainStatus = "", 0, 0
		}
	}
	return own, true
}

// rankUnit is the unit of rank r of the group in slot.
func rankUnit(pool string, slot, r int) string {
	if r == 0 {
		return units.UnitName(pool, slot)
	}
	return units.RankUnitName(pool, slot, r)
}

// brokenGroup says whether a live group whose rank 0 still runs or is
// stopping (st) has lost another rank, and which one.
func brokenGroup[W Worker](lw W, w units.Worker, st State) (RankExit, bool) {
	if lw.Size() < 2 || (st != Running && st != Stopping) {
		return RankExit{}, false
	}
	e, ok := GroupExit(lw.Unit(), w, true, lw.Size())
	if !ok || e.Rank == 0 {
		// Rank 0 alone stopping is a stop from outside, as for a
		// single unit.
		return RankExit{}, false
	}
	return e, true
}

// breakGroup ends a live group that has lost rank e.Rank while its rank 0
// (w, as listed) is still up: a crash of the group, whose units hold its
// slot until they are gone. Its running units are stopped, should
// systemd's binding of the ranks not have done it already.
func (t *Table[W]) breakGroup(now time.Time, lw W, w units.Worker, e RankExit, r *Reconciled[W]) {
	slot := lw.Slot()
	delete(t.Live, slot)
	t.forgiveLongRun(now, lw)
	r.Crashed = append(r.Crashed, Crash[W]{Worker: lw, Unit: w, Loaded: true, Delay: t.ArmBackoff(slot, now), Exit: &e})
	t.Draining[lw.Unit()] = Draining{Slot: slot, Ours: true, Rank: true}
	// st is the group's state; whether rank 0 itself still runs is its own.
	if own, ok := ownRank0(w, true); ok && Classify(own, true) == Running {
		r.Stops = appendNew(r.Stops, lw.Unit())
	}
	for _, rk := range w.Ranks {
		switch Classify(rk, true) {
		case Running:
			r.Stops = appendNew(r.Stops, rk.Unit)
			t.Draining[rk.Unit] = Draining{Slot: slot, Ours: true, Rank: true}
		case Stopping:
			t.Draining[rk.Unit] = Draining{Slot: slot, Ours: true, Rank: true}
		}
	}
}

// holdRanks keeps the slot of a group taken while any of its ranks is
// still loaded and not failed after its rank 0 is gone (a crash, or the
// end of a drain): such a rank joins the draining units, quietly, as the
// group's end has been reported. A rank that still runs with no rank 0 is
// stopped. Failed ranks are reset, so that their names can be used again.
// While rank 0 is live or draining, it holds the slot for the group.
func (t *Table[W]) holdRanks(listed []units.Worker, r *Reconciled[W]) {
	for _, w := range listed {
		if len(w.Ranks) == 0 {
			continue
		}
		lw, live := t.Live[w.Slot]
		_, draining := t.Draining[w.Unit]
		held := (live && lw.Unit() == w.Unit) || draining
		for _, rk := range w.Ranks {
			switch st := Classify(rk, true); {
			case st == Failed:
				r.Resets = appendNew(r.Resets, rk.Unit)
			case held || st == Gone:
			default:
				if _, ok := t.Draining[rk.Unit]; !ok {
					t.Draining[rk.Unit] = Draining{Slot: w.Slot, Ours: true, Rank: true}
				}
				if st == Running {
					r.Stops = appendNew(r.Stops, rk.Unit)
				}
			}
		}
	}
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
