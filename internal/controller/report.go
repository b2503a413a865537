package controller

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/controller/decide"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
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
