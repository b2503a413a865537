package workers

// What the journal says of gang groups (gang.go): a group's end is one
// entry, naming the rank that ended it, whether the daemon saw it happen
// or found it at its start; a failed start of a group names its rank.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/slots"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// groupCrashed reports a gang group that ended without being asked: one
// entry for the group, naming the rank that exited and its Result; the
// slot's backoff is armed, and said once, here.
func (r *reporter) groupCrashed(c crash) {
	e := c.Exit
	f := eventlog.Fields{
		"FLEXIQ_GROUP_SIZE":  strconv.Itoa(c.Worker.size),
		"FLEXIQ_BACKOFF_SEC": strconv.FormatFloat(c.Delay.Seconds(), 'f', -1, 64),
	}
	var what string
	switch {
	case e.Rank < 0:
		f["FLEXIQ_RESULT"] = "success"
		what = "every rank exited and was unloaded, so none is left to tell which exited first"
	case e.Loaded:
		f["FLEXIQ_RANK"], f["FLEXIQ_RANK_UNIT"] = strconv.Itoa(e.Rank), e.Unit
		f["FLEXIQ_RESULT"] = e.W.Result
		if e.W.ExecMainCode != 0 {
			f["FLEXIQ_EXIT_STATUS"] = strconv.Itoa(int(e.W.ExecMainStatus))
		}
		what = fmt.Sprintf("rank %d (%s) is %s (%s), Result=%s", e.Rank, e.Unit, e.W.ActiveState, exitText(e.W), e.W.Result)
	default:
		f["FLEXIQ_RANK"], f["FLEXIQ_RANK_UNIT"] = strconv.Itoa(e.Rank), e.Unit
		f["FLEXIQ_RESULT"] = "success"
		what = fmt.Sprintf("rank %d (%s) exited and was unloaded, Result=success", e.Rank, e.Unit)
	}
	r.log.Event(eventlog.WorkerCrashed, eventlog.Err, r.workerFields(c.Worker.slot, c.Worker.unit, f),
		"gang group %s (%d ranks) stopped without being asked: %s; the group is stopped and re-placed as a unit: slot %d may restart in %s",
		c.Worker.unit, c.Worker.size, what, c.Worker.slot, c.Delay)
}

// failedRank names, in a failed start's entry f and in its message, the
// rank of a gang group whose start failed, when the start error is that
// rank's; "" for rank 0 or a single unit.
func failedRank(f eventlog.Fields, se *units.StartError) string {
	if se == nil {
		return ""
	}
	rank, ok := rankOf(se.Unit)
	if !ok {
		return ""
	}
	f["FLEXIQ_RANK"], f["FLEXIQ_RANK_UNIT"] = strconv.Itoa(rank), se.Unit
	return fmt.Sprintf(" (rank %d, %s, failed: the group starts all or nothing, so none of its ranks is left running)", rank, se.Unit)
}

// rankOf reads R from a rank's unit, flexiq-POOL@SLOT-rR.service
// (units.RankUnitName), for R >= 1.
func rankOf(unit string) (int, bool) {
	rest, ok := strings.CutSuffix(unit, ".service")
	if !ok {
		return 0, false
	}
	_, inst, ok := strings.Cut(rest, "@")
	if !ok {
		return 0, false
	}
	slot, r, ok := strings.Cut(inst, "-r")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(r)
	if _, serr := strconv.Atoi(slot); err != nil || serr != nil || n < 1 || strconv.Itoa(n) != r {
		return 0, false
	}
	return n, true
}

// EndedWhileAway reports the gang groups that ended while no daemon
// watched them (rank 0 gone or failed, a rank of it still listed), as the
// daemon that started them would have: one crash entry for each, naming
// the rank, and the slot's backoff before the group is placed again. It
// runs once, at Start, before the first reconcile resets what they left.
func (ws *Workers) EndedWhileAway(now time.Time, listed []units.Worker) {
	for _, w := range listed {
		if len(w.Ranks) == 0 {
			continue
		}
		if st := slots.Classify(w, true); st == slots.Running || st == slots.Stopping {
			continue // adopted; the first reconcile judges it
		}
		size := max(slots.ListedGroupSize(w), ws.Cfg.GroupSize())
		for _, rk := range w.Ranks {
			size = max(size, rk.Rank+1)
		}
		e, ok := slots.GroupExit(w.Unit, w, true, size)
		if !ok || e.Rank < 0 {
			continue
		}
		lw := &Worker{slot: w.Slot, unit: w.Unit, size: size}
		ws.report.crashed(crash{Worker: lw, Unit: w, Delay: ws.Slots.ArmBackoff(w.Slot, now), Exit: &e})
		ws.restarts[w.Slot]++
	}
}
