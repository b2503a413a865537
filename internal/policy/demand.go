package policy

import "time"

// Demand modes: the demand = key of a pool.
const (
	// DemandNone adds no demand signal: today's behaviour, the default.
	DemandNone = ""
	// DemandLittlesLaw adds the busy threads that Little's law predicts:
	// the arrival rate times the mean service time, both observed over
	// demand_window_sec. Unlike depth and busy, which see only the jobs in
	// the queue at the instant of the tick, it remembers how much work has
	// been arriving, so a bursty queue keeps the workers it will need for
	// the next burst while a short scale-down window lets the surplus go.
	DemandLittlesLaw = "littles-law"
)

// DefaultDemandWindow is demand_window_sec's default.
const DefaultDemandWindow = 60 * time.Second

// littlesLaw is the workers the Little's law signal asks for: L = λ·W busy
// threads, at the target utilisation, in workers of ThreadsPerWorker
// threads. ok is false when the signal sits the tick out: the mode is off,
// or the source could not tell the rate and the service time.
func littlesLaw(p Params, o Observation) (workers int, ok bool) {
	if p.Demand != DemandLittlesLaw || !o.DemandKnown || o.ArrivalRate < 0 || o.ServiceTime < 0 {
		return 0, false
	}
	busy := o.ArrivalRate * o.ServiceTime.Seconds()
	return ceil(busy / float64(p.ThreadsPerWorker) / p.TargetUtilisation), true
}
