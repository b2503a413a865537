package decide

import (
	"strconv"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// demandState remembers whether the last demand read failed, so that a
// failing read is logged once until one succeeds.
type demandState struct{ failed bool }

// observeDemand fills the Little's law inputs of obs for a pool with
// demand = "littles-law": the arrival rate and the mean service time over
// demand_window_sec, as the source read them (readDemand). A source that
// cannot read them, or a read that failed, leaves the signal out of this
// tick (the other signals decide, as without the knob); the config check
// already refuses the knob for source types that cannot.
func (l *Local) observeDemand(read DemandRead, obs *policy.Observation) {
	if !read.Asked {
		return
	}
	if err := read.Err; err != nil {
		if !l.demand.failed {
			l.log.Event(eventlog.SourceError, eventlog.Warning, eventlog.Fields{"FLEXIQ_ERROR": err.Error()},
				"cannot read arrivals and service times, the Little's law signal sits out: %v", err)
		}
		l.demand.failed = true
		return
	}
	l.demand.failed = false
	d := read.D
	obs.ArrivalRate, obs.ServiceTime, obs.DemandKnown = d.ArrivalRate, d.ServiceTime, d.Known
}

// DemandFields adds the Little's law inputs and result to a decision's
// journal entry, and says them in its message.
func DemandFields(f eventlog.Fields, d policy.Decision, o policy.Observation) string {
	if !o.DemandKnown {
		return ""
	}
	f["FLEXIQ_ARRIVAL_RATE"] = strconv.FormatFloat(o.ArrivalRate, 'f', 3, 64)
	f["FLEXIQ_SERVICE_TIME"] = strconv.FormatFloat(o.ServiceTime.Seconds(), 'f', 3, 64)
	if d.LittlesLawUsed {
		f["FLEXIQ_LITTLES_LAW"] = strconv.Itoa(d.LittlesLaw)
	}
	return " arrivals=" + strconv.FormatFloat(o.ArrivalRate, 'f', 2, 64) + "/s service=" + o.ServiceTime.Round(time.Millisecond).String()
}
