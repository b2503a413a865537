package controller

// contract_stub.go: the controller API that the daemon codes against, as
// agreed with the integrator, stubbed on the i7-reload branch only. The
// integrator's controller provides the real NewPool(…, Options), Options and
// Roll: DELETE THIS FILE AT MERGE (and take the integrator's NewPool in
// pool.go, which this branch renamed to newPool).

import (
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Options are what the daemon gives a pool beyond its configuration.
type Options struct {
	StateDir string // where the pool keeps its state file; "" = none
	OnChange func() // called after any tick that changed the pool's Status
}

// NewPool prepares a pool; it starts nothing until Start. The stub ignores
// opts.
func NewPool(cfg *config.Pool, u *units.Manager, log *eventlog.Logger, opts Options) (*Pool, error) {
	return newPool(cfg, u, log)
}

// Roll asks for a rolling replacement of every worker of the pool. The stub
// only logs the request.
func (p *Pool) Roll(reason string) {
	p.log.Event(eventlog.Lifecycle, eventlog.Notice, p.fields(nil), "pool=%s roll requested: %s", p.name, reason)
}
