package units

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// What issue 9 adds to a worker unit and to the manager: dependencies on
// other units (Requires= with After=), a start condition (ExecCondition=),
// the state of the units workers depend on, and the quiet signal of a
// two-phase drain (a kill of the main process only).

// ErrConditionSkipped is wrapped by StartWorker's error when the worker's
// start condition (ExecCondition=) said "not yet": systemd skipped the unit
// rather than failing it. It is not a crash and says nothing against the
// slot.
var ErrConditionSkipped = errors.New("start condition not met")

// execCommand is one entry of an Exec*= property, D-Bus signature (sasb):
// the path, argv (argv[0] included) and whether a failure is ignored
// (systemd's "-" prefix; go-systemd names the field UncleanIsFailure, but
// systemd reads it as ignore_failure).
type execCommand struct {
	Path          string
	Args          []string
	IgnoreFailure bool
}

// readinessProperties are the unit properties of s.Requires and
// s.StartCondition.
//
// Requires= rather than BindsTo=: both stop the worker when the unit it
// needs is stopped on purpose (systemctl stop, or restart, which restarts
// the worker too), but BindsTo= also stops it the moment that unit leaves
// "active" for any reason, a crash or an automatic restart included: every
// flap of the database would kill the workers mid-job. With Requires= a
// flapping dependency leaves running workers alone; the pool defers
// scale-ups until it is back (Pool.depsReady). After= orders a worker's
// start after the units' own start jobs.
func (s WorkerSpec) readinessProperties() []sddbus.Property {
	var props []sddbus.Property
	if len(s.Requires) > 0 {
		props = append(props, prop("Requires", s.Requires), prop("After", s.Requires))
	}
	if len(s.StartCondition) > 0 {
		// Never ignore_failure ("-"): every exit would then pass.
		props = append(props, prop("ExecCondition", []execCommand{{Path: s.StartCondition[0], Args: s.StartCondition}}))
	}
	return props
}

// afterStart judges a start job that ended "done". With Type=exec that
// means the worker's command was executed, unless its start condition
// failed: systemd then skips the unit, leaves it inactive, and (since it is
// transient and inactive) unloads it at once, so that its Result
// ("exec-condition") can be gone before it can be read. A worker with a
// condition that is inactive or gone right after its start job is taken as
// skipped. (A worker that exits within the same instant after a passing
// condition is taken as skipped too: the pool retries it at its next tick
// either way.)
func (m *Manager) afterStart(ctx context.Context, s WorkerSpec, unit string) error {
	if len(s.StartCondition) == 0 {
		return nil
	}
	var st []sddbus.UnitStatus
	err := m.call(ctx, "reading "+unit, func(c *conn) error {
		var err error
		st, err = c.ListUnitsByNamesContext(ctx, []string{unit})
		return err
	})
	if err != nil {
		// The worker started; only the check of its condition failed.
		return nil
	}
	if len(st) == 0 || st[0].LoadState != "loaded" || st[0].ActiveState == "inactive" {
		return fmt.Errorf("starting %s: %w (ExecCondition %q)", unit, ErrConditionSkipped, s.StartCondition)
	}
	return nil
}

// UnitStates returns the ActiveState of each of names ("active",
// "inactive", "failed", "activating", ...); a unit that is not loaded is
// "inactive", as systemd reports it.
func (m *Manager) UnitStates(ctx context.Context, names []string) (map[string]string, error) {
	var st []sddbus.UnitStatus
	err := m.call(ctx, "reading the units workers require", func(c *conn) error {
		var err error
		st, err = c.ListUnitsByNamesContext(ctx, names)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(names))
	for _, u := range st {
		out[u.Name] = u.ActiveState
		if u.JobType == "stop" && u.ActiveState == "active" {
			// Its stop waits for the units ordered after it (the
			// workers, After=): a start now would be refused as a
			// destructive transaction.
			out[u.Name] = "deactivating"
		}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			out[n] = "inactive"
		}
	}
	return out, nil
}

// ControlGroup is a running service's or socket's cgroup, relative to the
// cgroup2 root (systemd's ControlGroup property): whose listeners a
// replica's ports may have (internal/portowner) before a listing has said
// it.
func (m *Manager) ControlGroup(ctx context.Context, unit string) (string, error) {
	iface := "Service"
	if strings.HasSuffix(unit, ".socket") {
		iface = "Socket"
	}
	var p *sddbus.Property
	err := m.call(ctx, "reading the control group of "+unit, func(c *conn) error {
		var err error
		p, err = c.GetUnitTypePropertyContext(ctx, unit, iface, "ControlGroup")
		return err
	})
	if err != nil {
		return "", err
	}
	cg, _ := p.Value.Value().(string)
	if cg == "" {
		return "", fmt.Errorf("%s has no control group (not running)", unit)
	}
	return cg, nil
}

// KillMain sends signal to the main process of unit only (who=main), as
// the quiet phase of a two-phase drain does: the worker's own children are
// its business, and the unit stays active.
func (m *Manager) KillMain(ctx context.Context, unit string, signal int) error {
	return m.call(ctx, fmt.Sprintf("sending signal %d to %s", signal, unit), func(c *conn) error {
		return c.KillUnitWithTarget(ctx, unit, sddbus.Main, int32(signal))
	})
}
