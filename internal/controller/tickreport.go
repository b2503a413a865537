package controller

import (
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// TickReport is what one tick saw and decided, for Options.OnTick (the
// Prometheus metrics). Every tick has one, unlike the journal, which writes a
// decision only when it changes.
type TickReport struct {
	Pool     string
	Decision policy.Decision
	Live     int
	Draining int
	Min, Max int
	// Mode is "active", "paused", "pinned" or "dry-run", as status shows
	// it (a paused or pinned dry-run pool is paused or pinned).
	Mode string
	// Counts is the source's reading; CountsValid is false when it failed
	// (SourceErr) or was not read this tick.
	Counts      source.Counts
	CountsValid bool
	SourceErr   error
	Duration    time.Duration
}

// lastObservation is the source's reading of the current tick, kept for its
// TickReport.
type lastObservation struct {
	counts source.Counts
	valid  bool
	err    error
}

// tickReport builds the report of the tick just run; p.mu is held.
func (p *Pool) tickReport(d policy.Decision, took time.Duration) TickReport {
	return TickReport{
		Pool: p.name, Decision: d,
		Live: len(p.fleet.live), Draining: len(p.fleet.draining),
		Min: p.cfg.MinWorkers, Max: p.cfg.MaxWorkers,
		Counts: p.lastObs.counts, CountsValid: p.lastObs.valid, SourceErr: p.lastObs.err,
		Duration: took,
		Mode:     p.modeKind(p.wallNow()),
	}
}

// modeKind is the pool's mode as one word, for the metrics' mode label.
func (p *Pool) modeKind(now time.Time) string {
	switch {
	case p.override.Active(now):
		return p.override.Kind
	case p.dryRun():
		return "dry-run"
	}
	return "active"
}
