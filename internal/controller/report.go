package controller

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/controller/decide"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// reporter writes a pool's journal entries. It remembers just enough to say
// each thing once: the last decision logged, and whether the source (or the
// state file) is in a run of failures.
type reporter struct {
	log    *eventlog.Logger // the pool's: With("pool", name)
	last   decisionKey
	srcLog *eventlog.Throttle
}

// decisionKey is what makes a decision worth a new entry. The current count
// is left out on purpose: while a crash loop keeps a pool below its target,
// every tick decides "scale-up 0 -> 2" again, which is no news.
type decisionKey struct {
	action  policy.Action
	desired int
}

func newReporter(log *eventlog.Logger) reporter {
	return reporter{log: log, srcLog: eventlog.NewThrottle(sourceLogRate)}
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

// decision writes one entry for each tick whose decision differs from the
// last one written: a new target, or a change of action (into a hold, back to
// stable). A plain hold is not written: the source error says why, throttled.
// c is the queue's own view, draining workers' jobs included.
func (r *reporter) decision(d policy.Decision, o policy.Observation, c source.Counts, valid bool, draining int) {
	key := decisionKey{d.Action, d.Desired}
	if key == r.last {
		return
	}
	r.last = key
	if d.Action == policy.Hold {
		return
	}
	f := eventlog.Fields{
		"FLEXIQ_CURRENT":  strconv.Itoa(d.Current),
		"FLEXIQ_DESIRED":  strconv.Itoa(d.Desired),
		"FLEXIQ_ACTION":   string(d.Action),
		"FLEXIQ_DRAINING": strconv.Itoa(draining),
	}
	// Which rule acted, which limit held, what the host guard did.
	for k, v := range map[string]string{"FLEXIQ_RULE": d.Rule, "FLEXIQ_LIMIT": d.Limit, "FLEXIQ_GUARD": string(d.Guard)} {
		if v != "" {
			f[k] = v
		}
	}
	queue := "queue unknown"
	if valid {
		f["FLEXIQ_PENDING"] = strconv.FormatInt(c.Pending, 10)
		f["FLEXIQ_RUNNING"] = strconv.FormatInt(c.Running, 10)
		f["FLEXIQ_PAUSED"] = strconv.FormatInt(c.Paused, 10)
		queue = fmt.Sprintf("pending=%d running=%d", c.Pending, c.Running)
		if draining > 0 {
			queue += fmt.Sprintf(" (%d on %d draining workers)", c.Running-o.Running, draining)
		}
		if c.Paused > 0 {
			queue += fmt.Sprintf(" paused=%d", c.Paused)
		}
		if c.HasOldest {
			age := c.OldestAge.Round(time.Millisecond)
			f["FLEXIQ_OLDEST_AGE"] = strconv.FormatFloat(age.Seconds(), 'f', -1, 64)
			queue += fmt.Sprintf(" oldest=%s", age)
		}
		queue += decide.DemandFields(f, d, o)
	}
	r.log.Event(eventlog.Decision, eventlog.Notice, f, "%s workers=%d -> %d (%s)", queue, d.Current, d.Desired, d.Rationale)
}

func (r *reporter) sourceFailed(now time.Time, err error, live int) {
	log, suppressed := r.srcLog.Fail(now)
	if !log {
		return
	}
	more := ""
	if suppressed > 0 {
		more = fmt.Sprintf(" (%d more failures since the last report)", suppressed)
	}
	r.log.Event(eventlog.SourceError, eventlog.Warning, eventlog.Fields{"FLEXIQ_ERROR": err.Error()},
		"source unavailable, holding at %d workers within the pool's bounds: %v%s", live, err, more)
}

func (r *reporter) sourceOK(c source.Counts) {
	if r.srcLog.OK() {
		r.log.Event(eventlog.SourceRecovered, eventlog.Notice, nil, "source recovered: %d pending, %d running", c.Pending, c.Running)
	}
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

// tells is what the pool tells the daemon: that its summary changed
// (OnChange, for STATUS=), each tick's report (OnTick, for the metrics),
// and that it made progress (for the watchdog). Any goroutine may use it.
type tells struct {
	onChange func()
	onTick   func(api.TickReport)
	progress atomic.Int64 // unix nanos (wall clock) of the last completed tick
}

// changed tells the daemon that the summary changed, if it did.
func (t *tells) changed(changed bool) {
	if changed && t.onChange != nil {
		t.onChange()
	}
}

// ticked tells the daemon of a finished tick; the caller need not own the
// pool.
func (t *tells) ticked(d tickDone) {
	if t.onTick != nil {
		t.onTick(d.report)
	}
	t.progressed()
	t.changed(d.changed)
}

func (t *tells) progressed() { t.progress.Store(time.Now().UnixNano()) }

// last is when the pool last made progress.
func (t *tells) last() time.Time { return time.Unix(0, t.progress.Load()) }
