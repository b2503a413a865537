package config

import (
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// demandModes are the values of demand, "" being none written.
var demandModes = []string{"none", policy.DemandLittlesLaw}

// demand fills the opt-in demand signal: demand = "littles-law" and its
// window. Left out, demand is "none", DemandWindow stays 0 and the policy is
// today's.
func (l *loader) demand(p *Pool, r *rawPool, key func(...string) string) {
	if l.str(key("demand"), r.Demand, &p.Demand) {
		switch p.Demand {
		case "none":
			p.Demand = policy.DemandNone
		case policy.DemandLittlesLaw:
			// Arrivals and service times come from the job rows that
			// flexiq keeps (created_at, started_at, completed_at); only
			// that source reads them so far (source.DemandReader).
			if !sourceTypes[p.Source.Type].Demand {
				l.add(key("demand"), "%q needs a source that reads arrivals and service times: type %s, not %q",
					p.Demand, demandSources(), p.Source.Type)
			}
		default:
			l.add(key("demand"), "unknown mode %q (want %q or %q)", p.Demand, demandModes[0], demandModes[1])
			p.Demand = policy.DemandNone
		}
	}
	win := policy.DefaultDemandWindow
	if l.seconds(key("demand_window_sec"), r.DemandWindowSec, &win) {
		switch {
		case win < time.Second:
			l.add(key("demand_window_sec"), "must be >= 1: the arrival rate is counted over it")
		case p.Demand == policy.DemandNone:
			l.add(key("demand_window_sec"), `has no effect without demand = "littles-law"`)
		}
	}
	if p.Demand != policy.DemandNone {
		p.DemandWindow = win
	}
}

// effectiveDemandWindow is demand_window_sec as the effective configuration
// prints it: left out, as demand is, when the pool has no demand signal, so
// that a pool without one prints as it always has.
func effectiveDemandWindow(p *Pool) float64 {
	return p.DemandWindow.Seconds()
}
