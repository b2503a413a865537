package policy

import "time"

// A burst's onset and the quiet spell before it are where a pool that rests
// at min_workers loses its p95: the demand window has forgotten the last
// burst's service time, the few jobs of the new one that a tick sees ask
// for few workers through the depth signal, and the workers started then
// are late by a whole poll. Two opt-in rules cover it (issue 17, P4).

// onsetMinAge bounds the age the onset rate is measured over from below:
// jobs that arrived within milliseconds of one another say little about a
// rate, and a zero age would make it infinite.
const onsetMinAge = 500 * time.Millisecond

// onset is the workers the burst-onset signal asks for. The jobs a tick
// sees waiting arrived within the oldest one's age, so they arrived at
// about n/age jobs a second; by Little's law that rate times the service
// time is the threads the burst will keep busy. The service time is the
// last one the demand signal observed, remembered across the silence
// before the burst, when the demand window has none. n is the jobs
// waiting, and the running ones too when every thread is busy (a warm pool
// has already taken the burst's first jobs, which then cannot be older
// than the oldest waiting one by more than the time they ran). The signal
// sits out below OnsetMinJobs jobs (one or two jobs are noise, not a
// rate), with nothing waiting, or before any service time was observed; and
// whenever the demand window knows a service time: jobs finished within it,
// so the Little's law signal sees the load, and on steady traffic a few
// jobs close together are chance, not a burst.
func (r *Recommender) onset(p Params, o Observation) (workers int, ok bool) {
	if p.OnsetMinJobs < 1 || p.Demand != DemandLittlesLaw {
		return 0, false
	}
	if o.DemandKnown && o.ServiceTime > 0 {
		r.serviceTime = o.ServiceTime
	}
	if o.DemandKnown || r.serviceTime <= 0 || o.Pending < 1 || !o.OldestKnown || o.OldestAge < 0 {
		return 0, false
	}
	n := o.Pending
	if o.Current > 0 && o.Running >= int64(o.Current)*int64(p.ThreadsPerWorker) {
		n += o.Running
	}
	if n < int64(p.OnsetMinJobs) {
		return 0, false
	}
	rate := float64(n) / max(o.OldestAge, onsetMinAge).Seconds()
	return ceil(rate * r.serviceTime.Seconds() / float64(p.ThreadsPerWorker) / p.TargetUtilisation), true
}

// keepWarm is the floor the keep-warm rule puts under a scale-down: for
// KeepWarm after the last tick that saw work (a job waiting, or arrivals in
// the demand window), the pool does not go below KeepWarmWorkers. It only
// holds workers the pool already has, never starts any, so a pool that was
// at min_workers stays there. Running jobs do not count as work: a long job
// would keep the floor up for as long as it runs.
func (r *Recommender) keepWarm(now time.Time, p Params, o Observation) (floor int, ok bool) {
	if p.KeepWarmWorkers < 1 || p.KeepWarm <= 0 {
		return 0, false
	}
	if o.Pending > 0 || o.ArrivalRate > 0 {
		r.lastWork, r.worked = now, true
	}
	if !r.worked || now.Sub(r.lastWork) > p.KeepWarm {
		return 0, false
	}
	return min(o.Current, p.KeepWarmWorkers), true
}
