package controller

// The operator's pause and pin are kept by an override.Keeper
// (internal/controller/override), which the pool's owner holds: SetOverride
// hands it the operator's ask as a message to the loop, and the snapshot
// shows what it holds.

import (
	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
)

// SetOverride pauses or pins the pool (o.Kind), or ends either (kind
// api.OverrideNone), and writes it to the state directory so that it survives a
// restart. A pin is checked against max_workers. It returns the override in
// force afterwards. The loop is woken so that a pin acts at once.
func (p *Pool) SetOverride(o api.Override) (got api.Override, err error) {
	p.do(func() {
		if got, err = p.override.Set(o, p.cfg.MaxWorkers); err != nil {
			return
		}
		// Starts not yet sent follow the old ask: the next tick decides on
		// this one.
		p.acting.Supersede()
		p.wake.kick()
	})
	p.tell.changed(err == nil) // STATUS= shows the mode at once
	return got, err
}

// overrideChanged is the override.Keeper's hook: it refreshes the
// summary's and the snapshot's mode after a change of the override; the
// caller notifies (SetOverride), or the tick's publish does.
func overrideChanged(p *Pool) func() {
	return func() {
		p.pub.SetMode(p.override.Mode(p.wall(), dryRun(p.cfg)), p.override.Current())
	}
}

// dryRun says whether the pool decides without acting (mode = "dry-run").
func dryRun(cfg *config.Pool) bool { return cfg.Mode == config.ModeDryRun }
