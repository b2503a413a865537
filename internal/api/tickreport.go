package api

import "time"

// TickReport is what one tick saw and decided, for the controller's OnTick
// option (the Prometheus metrics). Every tick has one, unlike the journal,
// which writes a decision only when it changes. It carries only what the
// metrics show, in plain types, so that reading it needs neither the policy
// nor the sources.
type TickReport struct {
	Pool string
	// Action and Desired are the tick's decision: Action is one of the
	// policy's actions ("scale-up", "scale-down", "stable", "hold"), the
	// decisions counter's label; "" when the tick decided nothing.
	Action  string
	Desired int

	Live     int
	Draining int
	// Service is set for a service pool, whose Live splits into Ready and
	// NotReady.
	Service         bool
	Ready, NotReady int
	Min, Max        int
	// Mode is "active", "paused", "pinned" or "dry-run", as status shows
	// it (a paused or pinned dry-run pool is paused or pinned).
	Mode string
	// Queue is the source's reading of this tick, as status shows it; nil
	// when the read failed (SourceErr) or the source was not read this tick.
	Queue     *QueueView
	SourceErr error
	// Degraded: the pool's baseline workers keep failing.
	Degraded bool
	// Fleet is a fleet pool's coordination (issue 20); nil otherwise.
	Fleet    *FleetView
	Duration time.Duration
}
