// Package override keeps a pool's operator override: `flexiq-scaled pause`
// stops its scaling (crashed workers are still replaced, up to the target it
// had), `flexiq-scaled pin N` holds exactly N workers whatever the queue
// says. Either may carry a deadline (--for), after which the pool resumes by
// itself. It also says the pool's mode (active, dry-run, paused, pinned) and
// bends the policy's decision to the override.
//
// Unlike the pool's state file (the windows' history, on CLOCK_MONOTONIC in
// the runtime directory, meaningless after a reboot), an override is an
// operator's decision: it lives in the state directory
// (/var/lib/flexiq-scaled, StateDirectory=) and survives a reboot too, and
// its deadline is on the wall clock, because "for 10 minutes" means ten
// minutes of the operator's time whether or not the daemon restarts
// meanwhile.
//
// A Keeper belongs to its pool's owner (the controller's loop): nothing in
// it is safe for another goroutine. Readers see the override in the pool's
// snapshot.
package override

import (
	"fmt"
	"strconv"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/poolstore"
)

const version = 1

// File is the content of an override's file.
type File struct {
	Version int    `json:"version"`
	Pool    string `json:"pool"`
	api.Override
}

// Keeper is one pool's override.
type Keeper struct {
	pool  string
	store poolstore.Store[File]
	log   *eventlog.Logger
	wall  func() time.Time
	// changed is called after every change of the override, for the
	// pool's snapshot and summary to show it.
	changed func()
	o       api.Override
	lastDry dryKey // the last "would scale" logged in dry-run
}

// dryKey is what makes a dry-run decision worth a new entry.
type dryKey struct {
	action  policy.Action
	desired int
}

// New is the override of pool, kept in override-POOL.json in dir ("" keeps
// it in memory only). wall is the operator's clock (nil is time.Now);
// changed is called after each change.
func New(pool, dir string, log *eventlog.Logger, wall func() time.Time, changed func()) *Keeper {
	if wall == nil {
		wall = time.Now
	}
	return &Keeper{pool: pool, store: poolstore.Store[File]{Dir: dir, Prefix: "override-"}, log: log, wall: wall, changed: changed}
}

// Now is the operator's time.
func (k *Keeper) Now() time.Time { return k.wall() }

// Path is the override's file, "" when none is kept.
func (k *Keeper) Path() string { return k.store.Path(k.pool) }

// Current is the override as set, expired or not.
func (k *Keeper) Current() api.Override { return k.o }

// Active says whether an override is in force at now.
func (k *Keeper) Active(now time.Time) bool { return k.o.Active(now) }

// InForce is the override in force at wall-clock now (a zero one if none,
// or if it has expired and the next tick has yet to say so).
func (k *Keeper) InForce(now time.Time) api.Override {
	if k.o.Active(now) {
		return k.o
	}
	return api.Override{}
}

// Set pauses or pins the pool (o.Kind), or ends either (kind
// api.OverrideNone), and writes it down so that it survives a restart. A pin
// is checked against maxWorkers. It returns the override in force
// afterwards.
func (k *Keeper) Set(o api.Override, maxWorkers int) (api.Override, error) {
	now := k.wall()
	switch o.Kind {
	case api.OverrideNone:
	case api.OverridePaused:
		o.Workers = 0
	case api.OverridePinned:
		if o.Workers < 0 || o.Workers > maxWorkers {
			return k.o, fmt.Errorf("%w: pool %s: pin %d is outside 0..max_workers (%d)", api.ErrOverride, k.pool, o.Workers, maxWorkers)
		}
	default:
		return k.o, fmt.Errorf("%w: unknown kind %q", api.ErrOverride, o.Kind)
	}
	if !o.Until.IsZero() && !o.Until.After(now) {
		return k.o, fmt.Errorf("%w: deadline %s is not in the future", api.ErrOverride, o.Until.Format(time.RFC3339))
	}
	o.Since = now
	old := k.o
	if o.Kind == api.OverrideNone {
		o = api.Override{}
	}
	k.o = o
	if err := k.save(); err != nil {
		k.o = old
		return old, err
	}
	k.logChange(old, o, "")
	k.changed()
	return o, nil
}

// Expire ends an override whose deadline has passed; the pool calls it at
// every tick, and at start.
func (k *Keeper) Expire(now time.Time) {
	if k.o.Kind == api.OverrideNone || k.o.Active(now) {
		return
	}
	old := k.o
	k.o = api.Override{}
	if err := k.store.Remove(k.pool); err != nil {
		k.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "cannot remove %s: %v", k.Path(), err)
	}
	k.logChange(old, api.Override{}, fmt.Sprintf(" (its --for deadline %s passed)", old.Until.Format(time.RFC3339)))
	k.changed()
}

func (k *Keeper) logChange(old, o api.Override, why string) {
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
		k.log.Event(eventlog.PoolPaused, eventlog.Notice, f, "%s%s: scaling stopped, crashed workers are still replaced", o, by)
	case o.Kind == api.OverridePinned:
		k.log.Event(eventlog.PoolPinned, eventlog.Notice, f, "%s%s: holding exactly %d workers", o, by, o.Workers)
	case old.Kind != api.OverrideNone:
		k.log.Event(eventlog.PoolResumed, eventlog.Notice, f, "resumed scaling, was %s%s%s", old.Kind, why, by)
	}
}

func (k *Keeper) save() error {
	if k.o.Kind == api.OverrideNone {
		if err := k.store.Remove(k.pool); err != nil {
			return fmt.Errorf("removing %s: %w", k.Path(), err)
		}
		return nil
	}
	if err := k.store.Save(k.pool, File{Version: version, Pool: k.pool, Override: k.o}); err != nil {
		return fmt.Errorf("saving the override: %w", err)
	}
	return nil
}

// Load restores a saved override at start. One that expired while the
// daemon was down is removed, and said so; a pin above a lowered
// max_workers is held at max_workers (Apply).
func (k *Keeper) Load() {
	so, ok, err := k.store.Load(k.pool)
	if !ok {
		return
	}
	path := k.Path()
	switch {
	case err != nil:
	case so.Version != version:
		err = fmt.Errorf("unknown version %d", so.Version)
	case so.Pool != k.pool:
		err = fmt.Errorf("written for pool %q", so.Pool)
	case so.Kind != api.OverridePaused && so.Kind != api.OverridePinned:
		err = fmt.Errorf("unknown kind %q", so.Kind)
	}
	if err != nil {
		k.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "ignoring its override file %s: %v", path, err)
		return
	}
	k.o = so.Override
	now := k.wall()
	if !k.o.Active(now) {
		k.Expire(now)
		return
	}
	k.log.Event(eventlog.Lifecycle, eventlog.Info, nil, "restored its override from %s: %s", path, k.o)
	k.changed()
}

// Mode is the pool's mode as status shows it: dry-run, paused, pinned or
// active (an override in a dry-run pool shows both).
func (k *Keeper) Mode(now time.Time, dryRun bool) string {
	m := "active"
	if k.o.Active(now) {
		m = k.o.String()
	}
	if dryRun {
		if m == "active" {
			return "dry-run"
		}
		return "dry-run, " + m
	}
	return m
}

// Kind is the pool's mode as one word, for the metrics' mode label and
// the view: the override's kind, else dry-run or active.
func (k *Keeper) Kind(now time.Time, dryRun bool) string {
	switch {
	case k.o.Active(now):
		return k.o.Kind
	case dryRun:
		return "dry-run"
	}
	return "active"
}

// Apply bends the policy's decision d to the override: a paused pool
// holds its target (crashed workers were replaced up to it already), a
// pinned one goes to its pin, at most maxWorkers. The step added to e says
// what the policy would have done.
func (k *Keeper) Apply(wall time.Time, d policy.Decision, e *api.Explanation, target, maxWorkers int) policy.Decision {
	o := k.InForce(wall)
	switch o.Kind {
	case api.OverridePaused:
		would := d
		d.Action, d.Desired = policy.Hold, target
		d.Rationale = fmt.Sprintf("paused; the policy says %s %d -> %d (%s)", would.Action, would.Current, would.Desired, would.Rationale)
		e.Add(api.Step{Name: "override", Value: o.String(), Held: would.Desired != target,
			Note: fmt.Sprintf("holding the target %d; the policy says %d", target, would.Desired)})
	case api.OverridePinned:
		would := d
		d.Desired = min(o.Workers, maxWorkers)
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

// WouldScale logs a dry-run pool's decision, once per change of it: what
// it would do, which it does not.
func (k *Keeper) WouldScale(d policy.Decision, e *api.Explanation) {
	e.Add(api.Step{Name: "dry-run", Value: "not acted on", Held: d.Desired != d.Current, Note: `mode = "dry-run": no unit is started or stopped`})
	key := dryKey{d.Action, d.Desired}
	if key == k.lastDry || d.Action == policy.Hold {
		return
	}
	k.lastDry = key
	verb := fmt.Sprintf("would scale %d → %d", d.Current, d.Desired)
	if d.Action == policy.Stable {
		verb = fmt.Sprintf("would stay at %d", d.Current)
	}
	k.log.Event(eventlog.DryRunDecision, eventlog.Notice, eventlog.Fields{
		"FLEXIQ_CURRENT": strconv.Itoa(d.Current), "FLEXIQ_DESIRED": strconv.Itoa(d.Desired),
		"FLEXIQ_ACTION": string(d.Action), "FLEXIQ_MODE": "dry-run",
	}, "dry-run: %s (%s)", verb, d.Rationale)
}
