package config

import "github.com/flexiq/flexiq-scaled/internal/policy"

// warm fills the two opt-in rules for a burst's onset (policy/warm.go):
// onset_min_jobs, and keep_warm_workers with keep_warm_sec. Left out, both
// are off and the policy is as it was. Called after demand, which the
// onset signal needs.
func (l *loader) warm(p *Pool, r *rawPool, key func(...string) string) {
	if l.integer(key("onset_min_jobs"), r.OnsetMinJobs, &p.OnsetMinJobs) {
		switch {
		case p.OnsetMinJobs < 0:
			l.add(key("onset_min_jobs"), "must be >= 0 (0 turns the burst-onset signal off)")
		case p.OnsetMinJobs == 1:
			l.add(key("onset_min_jobs"), "must be >= 2: one job's age is no arrival rate")
		case p.OnsetMinJobs > 1 && p.Demand != policy.DemandLittlesLaw:
			l.add(key("onset_min_jobs"), `has no effect without demand = "littles-law": it uses the service time that signal observes`)
		}
	}
	if l.integer(key("keep_warm_workers"), r.KeepWarmWorkers, &p.KeepWarmWorkers) {
		switch {
		case p.KeepWarmWorkers < 0:
			l.add(key("keep_warm_workers"), "must be >= 0 (0 turns keep-warm off)")
		case p.KeepWarmWorkers > p.MaxWorkers:
			l.add(key("keep_warm_workers"), "must be <= max_workers (%d)", p.MaxWorkers)
		}
	}
	if l.seconds(key("keep_warm_sec"), r.KeepWarmSec, &p.KeepWarm) && p.KeepWarm < 0 {
		l.add(key("keep_warm_sec"), "must be >= 0")
		return
	}
	switch {
	case p.KeepWarmWorkers > 0 && p.KeepWarm == 0:
		l.add(key("keep_warm_workers"), "needs keep_warm_sec > 0: how long after the last work the floor holds")
	case p.KeepWarmWorkers <= 0 && p.KeepWarm > 0:
		l.add(key("keep_warm_sec"), "has no effect without keep_warm_workers > 0")
	}
}

// keepWarmSec is keep_warm_sec for the effective configuration.
func keepWarmSec(p *Pool) float64 { return p.KeepWarm.Seconds() }
