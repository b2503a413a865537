package workers

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// reporter writes the workers' journal entries: starts that failed,
// crashes, drains and stops. It shares the pool's logger, so its entries
// carry FLEXIQ_POOL as the pool's own.
type reporter struct {
	log *eventlog.Logger // the pool's: With("pool", name)
}

// workerFields are a worker's entry's fields; the pool's logger adds
// FLEXIQ_POOL.
func (r *reporter) workerFields(slot int, unit string, extra eventlog.Fields) eventlog.Fields {
	f := maps.Clone(extra)
	if f == nil {
		f = eventlog.Fields{}
	}
	f["FLEXIQ_SLOT"] = strconv.Itoa(slot)
	f["FLEXIQ_UNIT"] = unit
	return f
}

// crashed reports a worker that went away on its own; its slot's backoff is
// armed, and said once, here.
func (r *reporter) crashed(c crash) {
	if c.Exit != nil {
		r.groupCrashed(c)
		return
	}
	result, how := "success", "exited and was unloaded"
	if c.Loaded {
		result = c.Unit.Result
		how = fmt.Sprintf("is %s (%s)", c.Unit.ActiveState, exitText(c.Unit))
	}
	r.log.Event(eventlog.WorkerCrashed, eventlog.Err, r.workerFields(c.Worker.slot, c.Worker.unit, eventlog.Fields{
		"FLEXIQ_RESULT": result, "FLEXIQ_EXIT_STATUS": strconv.Itoa(int(c.Unit.ExecMainStatus)),
		"FLEXIQ_BACKOFF_SEC": strconv.FormatFloat(c.Delay.Seconds(), 'f', -1, 64),
	}), "worker %s stopped without being asked: it %s, Result=%s; slot %d may restart in %s", c.Worker.unit, how, result, c.Worker.slot, c.Delay)
}

// startFailed reports a start job that failed, with the unit's own Result
// and exit status where systemd gave them.
func (r *reporter) startFailed(slot int, unit, why string, err error, delay time.Duration) {
	f := eventlog.Fields{"FLEXIQ_BACKOFF_SEC": strconv.FormatFloat(delay.Seconds(), 'f', -1, 64), "FLEXIQ_ERROR": err.Error()}
	var se *units.StartError
	if errors.As(err, &se) {
		f["FLEXIQ_JOB_RESULT"] = se.JobResult
		f["FLEXIQ_RESULT"] = se.JobResult
		if se.Result != "" {
			f["FLEXIQ_RESULT"] = se.Result
			f["FLEXIQ_EXIT_STATUS"] = strconv.Itoa(int(se.ExitStatus))
		}
	} else {
		f["FLEXIQ_RESULT"] = "start-failed"
	}
	rank := failedRank(f, se)
	r.log.Event(eventlog.WorkerCrashed, eventlog.Err, r.workerFields(slot, unit, f),
		"worker %s failed to start (%s): %v%s%s; slot %d may retry in %s", unit, why, err, exitHint(se), rank, slot, delay)
}

// exitHint explains the exit statuses that systemd itself sets when it
// cannot run the command at all.
func exitHint(se *units.StartError) string {
	if se == nil || se.Result != "exit-code" {
		return ""
	}
	switch se.ExitStatus {
	case 203:
		return " (203/EXEC: systemd could not execute exec[0]; a relative command is looked up in systemd's fixed search path, not in the pool's PATH)"
	case 217:
		return " (217/USER: the user does not exist)"
	case 216:
		return " (216/GROUP: the group does not exist)"
	case 200:
		return " (200/CHDIR: working_directory cannot be entered)"
	}
	return ""
}

func (r *reporter) draining(slot int, unit, why string) {
	r.log.Event(eventlog.WorkerDraining, eventlog.Info, r.workerFields(slot, unit, eventlog.Fields{"FLEXIQ_REASON": why}),
		"draining %s (%s)", unit, why)
}

// stopped reports a drained unit as systemd left it. A drain that ended
// in SIGKILL (Result=timeout) may have lost work in flight: a warning.
func (r *reporter) stopped(s stopped) {
	f := eventlog.Fields{"FLEXIQ_RESULT": s.Result}
	pri, note := eventlog.Info, ""
	if s.Exit.ExecMainCode != 0 {
		f["FLEXIQ_EXIT_STATUS"] = strconv.Itoa(int(s.Exit.ExecMainStatus))
	}
	switch s.Result {
	case "success":
	case "timeout":
		pri, note = eventlog.Warning, ": it did not finish within drain_timeout_sec and was SIGKILLed; work in flight may have been lost"
	default:
		pri, note = eventlog.Warning, fmt.Sprintf(" (%s)", exitText(s.Exit))
	}
	r.log.Event(eventlog.WorkerStopped, pri, r.workerFields(s.Slot, s.Unit, f), "%s stopped, Result=%s%s", s.Unit, s.Result, note)
}

func exitText(w units.Worker) string {
	switch w.ExecMainCode {
	case 1:
		return fmt.Sprintf("exit status %d", w.ExecMainStatus)
	case 2, 3:
		return fmt.Sprintf("killed by signal %d", w.ExecMainStatus)
	}
	return "no exit status"
}
