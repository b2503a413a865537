package controller

import (
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// lastObservation is the source's reading of the current tick, kept for its
// api.TickReport.
type lastObservation struct {
	counts source.Counts
	valid  bool
	err    error
}

// tickReport builds the report of the tick just run, as the pool's owner.
func (p *Pool) tickReport(d policy.Decision, took time.Duration) api.TickReport {
	r := api.TickReport{
		Pool: p.name, Action: string(d.Action), Desired: d.Desired,
		Live: p.workers.live(), Draining: p.workers.draining(),
		Min: p.cfg.MinWorkers, Max: p.cfg.MaxWorkers,
		SourceErr: p.lastObs.err,
		Duration:  took,
		Mode:      p.override.Kind(p.wallNow(), p.dryRun()),
		Degraded:  p.degraded.on,
		Fleet:     p.fleetView(),
	}
	if p.workers.svc != nil {
		r.Service = true
		r.Ready, r.NotReady = p.workers.readyCount()
	}
	if p.lastObs.valid && !p.cfg.NoQueue() {
		r.Queue = queueView(p.lastObs.counts)
	}
	return r
}
