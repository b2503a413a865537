package controller

// An override is an operator's hand on a pool: `flexiq-scaled pause` stops
// its scaling (crashed workers are still replaced, up to the target it had),
// `flexiq-scaled pin N` holds exactly N workers whatever the queue says.
// Either may carry a deadline (--for), after which the pool resumes by
// itself.
//
// Unlike the pool's state file (the windows' history, on CLOCK_MONOTONIC in
// the runtime directory, meaningless after a reboot), an override is an
// operator's decision: it lives in the state directory
// (/var/lib/flexiq-scaled, StateDirectory=) and survives a reboot too, and
// its deadline is on the wall clock, because "for 10 minutes" means ten
// minutes of the operator's time whether or not the daemon restarts
// meanwhile.

import (
	"fmt"
	"strconv"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/poolstore"
)

const overrideVersion = 1

type savedOverride struct {
	Version int    `json:"version"`
	Pool    string `json:"pool"`
	api.Override
}

// overrideStore is where the pool's override is kept: override-POOL.json
// in the state directory.
func (p *Pool) overrideStore() poolstore.Store[savedOverride] {
	return poolstore.Store[savedOverride]{Dir: p.opts.OverrideDir, Prefix: "override-"}
}

func (p *Pool) overridePath() string { return p.overrideStore().Path(p.name) }

func (p *Pool) wallNow() time.Time {
	if p.opts.WallClock != nil {
		return p.opts.WallClock()
	}
	return time.Now()
}

// SetOverride pauses or pins the pool (o.Kind), or ends either (kind
// api.OverrideNone), and writes it to the state directory so that it survives a
// restart. A pin is checked against max_workers. It returns the override in
// force afterwards. The loop is woken so that a pin acts at once.
func (p *Pool) SetOverride(o api.Override) (api.Override, error) {
	got, err := p.setOverride(o)
	p.notify(err == nil) // STATUS= shows the mode at once
	return got, err
}

func (p *Pool) setOverride(o api.Override) (got api.Override, err error) {
	p.do(func() { got, err = p.overrideTo(o) })
	return got, err
}

func (p *Pool) overrideTo(o api.Override) (api.Override, error) {
	now := p.wallNow()
	switch o.Kind {
	case api.OverrideNone:
	case api.OverridePaused:
		o.Workers = 0
	case api.OverridePinned:
		if o.Workers < 0 || o.Workers > p.cfg.MaxWorkers {
			return p.override, fmt.Errorf("%w: pool %s: pin %d is outside 0..max_workers (%d)", api.ErrOverride, p.name, o.Workers, p.cfg.MaxWorkers)
		}
	default:
		return p.override, fmt.Errorf("%w: unknown kind %q", api.ErrOverride, o.Kind)
	}
	if !o.Until.IsZero() && !o.Until.After(now) {
		return p.override, fmt.Errorf("%w: deadline %s is not in the future", api.ErrOverride, o.Until.Format(time.RFC3339))
	}
	o.Since = now
	old := p.override
	if o.Kind == api.OverrideNone {
		o = api.Override{}
	}
	p.override = o
	if err := p.saveOverride(); err != nil {
		p.override = old
		return old, err
	}
	p.logOverride(old, o, "")
	p.overrideChanged()
	// Starts not yet sent follow the old ask: the next tick decides on
	// this one.
	p.acting.Supersede()
	p.kick()
	return o, nil
}

// overrideChanged refreshes the summary's and the snapshot's mode; the
// caller notifies (SetOverride), or the tick's publish does.
func (p *Pool) overrideChanged() {
	p.pub.status.Mode = p.modeString(p.wallNow())
	p.pub.setMode(p.modeString(p.wallNow()), p.override)
}

// expireOverride ends an override whose deadline has passed; it is called
// at every tick, and at start.
func (p *Pool) expireOverride(now time.Time) {
	if p.override.Kind == api.OverrideNone || p.override.Active(now) {
		return
	}
	old := p.override
	p.override = api.Override{}
	if err := p.overrideStore().Remove(p.name); err != nil {
		p.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "cannot remove %s: %v", p.overridePath(), err)
	}
	p.logOverride(old, api.Override{}, fmt.Sprintf(" (its --for deadline %s passed)", old.Until.Format(time.RFC3339)))
	p.overrideChanged()
}

func (p *Pool) logOverride(old, o api.Override, why string) {
	f := eventlog.Fields{"FLEXIQ_OVERRIDE": o.Kind}
	if o.Kind == api.OverridePinned {
		f["FLEXIQ_PINNED"] = strconv.Itoa(o.Workers)
	}
	if !o.Until.IsZero() {
		f["FLEXIQ_UNTIL"] = o.Until.UTC().Format(time.RFC3339)
	}
	by := ""
	if o.By != "" {
		by = " by " + o.By
	}
	switch {
	case o.Kind == api.OverridePaused:
		p.log.Event(eventlog.PoolPaused, eventlog.Notice, f, "%s%s: scaling stopped, crashed workers are still replaced", o, by)
	case o.Kind == api.OverridePinned:
		p.log.Event(eventlog.PoolPinned, eventlog.Notice, f, "%s%s: holding exactly %d workers", o, by, o.Workers)
	case old.Kind != api.OverrideNone:
		p.log.Event(eventlog.PoolResumed, eventlog.Notice, f, "resumed scaling, was %s%s%s", old.Kind, why, by)
	}
}

func (p *Pool) saveOverride() error {
	if p.override.Kind == api.OverrideNone {
		if err := p.overrideStore().Remove(p.name); err != nil {
			return fmt.Errorf("removing %s: %w", p.overridePath(), err)
		}
		return nil
	}
	if err := p.overrideStore().Save(p.name, savedOverride{Version: overrideVersion, Pool: p.name, Override: p.override}); err != nil {
		return fmt.Errorf("saving the override: %w", err)
	}
	return nil
}

// loadOverride restores a saved override at start. One that expired while
// the daemon was down is removed, and said so; a pin above a lowered
// max_workers is held at max_workers.
func (p *Pool) loadOverride() {
	so, ok, err := p.overrideStore().Load(p.name)
	if !ok {
		return
	}
	path := p.overridePath()
	switch {
	case err != nil:
	case so.Version != overrideVersion:
		err = fmt.Errorf("unknown version %d", so.Version)
	case so.Pool != p.name:
		err = fmt.Errorf("written for pool %q", so.Pool)
	case so.Kind != api.OverridePaused && so.Kind != api.OverridePinned:
		err = fmt.Errorf("unknown kind %q", so.Kind)
	}
	if err != nil {
		p.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "ignoring its override file %s: %v", path, err)
		return
	}
	p.override = so.Override
	now := p.wallNow()
	if !p.override.Active(now) {
		p.expireOverride(now)
		return
	}
	p.log.Event(eventlog.Lifecycle, eventlog.Info, nil, "restored its override from %s: %s", path, p.override)
	p.overrideChanged()
}

// Override is the pool's override in force, as last published.
func (p *Pool) Override() api.Override { return p.snap.Load().override }

// dryRun says whether the pool decides without acting (mode = "dry-run").
func (p *Pool) dryRun() bool { return p.cfg.Mode == config.ModeDryRun }

// modeString is the pool's mode as status shows it: dry-run, paused,
// pinned or active (an override in a dry-run pool shows both).
func (p *Pool) modeString(now time.Time) string {
	m := "active"
	if p.override.Active(now) {
		m = p.override.String()
	}
	if p.dryRun() {
		if m == "active" {
			return "dry-run"
		}
		return "dry-run, " + m
	}
	return m
}

// applyOverride bends the policy's decision d to the operator's override:
// a paused pool holds its target (crashed workers were replaced up to it
// already), a pinned one goes to its pin. The step says what the policy
// would have done.
func (p *Pool) applyOverride(wall time.Time, d policy.Decision, e *api.Explanation) policy.Decision {
	o := p.activeOverride(wall)
	switch o.Kind {
	case api.OverridePaused:
		would := d
		d.Action, d.Desired = policy.Hold, p.workers.target
		d.Rationale = fmt.Sprintf("paused; the policy says %s %d -> %d (%s)", would.Action, would.Current, would.Desired, would.Rationale)
		e.Add(api.Step{Name: "override", Value: o.String(), Held: would.Desired != p.workers.target,
			Note: fmt.Sprintf("holding the target %d; the policy says %d", p.workers.target, would.Desired)})
	case api.OverridePinned:
		would := d
		d.Desired = min(o.Workers, p.cfg.MaxWorkers)
		switch {
		case d.Desired > d.Current:
			d.Action = policy.ScaleUp
		case d.Desired < d.Current:
			d.Action = policy.ScaleDown
		default:
			d.Action = policy.Stable
		}
		d.Rationale = fmt.Sprintf("%s; the policy says %d (%s)", o, would.Desired, would.Rationale)
		e.Add(api.Step{Name: "override", Value: o.String(), Held: would.Desired != d.Desired,
			Note: fmt.Sprintf("holding exactly %d; the policy says %d", d.Desired, would.Desired)})
	}
	return d
}

// wouldScale logs a dry-run pool's decision, once per change of it: what
// it would do, which it does not.
func (p *Pool) wouldScale(d policy.Decision, e *api.Explanation) {
	e.Add(api.Step{Name: "dry-run", Value: "not acted on", Held: d.Desired != d.Current, Note: `mode = "dry-run": no unit is started or stopped`})
	key := decisionKey{d.Action, d.Desired}
	if key == p.lastDry || d.Action == policy.Hold {
		return
	}
	p.lastDry = key
	verb := fmt.Sprintf("would scale %d → %d", d.Current, d.Desired)
	if d.Action == policy.Stable {
		verb = fmt.Sprintf("would stay at %d", d.Current)
	}
	p.log.Event(eventlog.DryRunDecision, eventlog.Notice, eventlog.Fields{
		"FLEXIQ_CURRENT": strconv.Itoa(d.Current), "FLEXIQ_DESIRED": strconv.Itoa(d.Desired),
		"FLEXIQ_ACTION": string(d.Action), "FLEXIQ_MODE": "dry-run",
	}, "dry-run: %s (%s)", verb, d.Rationale)
}
