package units

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// Gang groups (issue 19): a worker of N >= 2 ranks is N transient units,
// rank 0 UnitName(pool, slot) and rank R RankUnitName(pool, slot, R),
// started all at once by one StartTransientUnit call: rank 0 is the main
// unit and ranks 1 … N-1 its auxiliary units, so that systemd creates all
// of them or none (an auxiliary unit that exists fails the whole call).
//
// What holds the group together is BindsTo=, both ways: rank 0 is bound to
// every other rank, and every other rank to rank 0. BindsTo= pulls the
// bound units' start jobs into rank 0's transaction; a rank whose start
// fails fails the start jobs still pending of the ranks bound to it; and a
// rank that leaves "active" for any reason (an exit, a crash, a kill, a
// stop) stops every unit bound to it: any rank stops rank 0, and rank 0
// stops every rank. It is systemd's own doing, so it holds while the
// daemon is stopped. (Requires= would not do: it stops a unit only when the
// unit it requires is stopped by a job, not when its process exits.)
//
// There is no ordering (After=) between the ranks: they start in parallel,
// as ranks that rendezvous with each other must (with Type=notify, a rank
// ordered after another would not even start before that one's READY=1),
// and they stop in parallel, each with its own KillSignal= and
// TimeoutStopSec=, so that a group's stop takes one drain period, not N.
// The price is that rank 0's start job says nothing about the others', so
// StartWorker waits until no rank has a job left and judges the ranks'
// states (settleGroup).

// isGroup says whether s is a gang group rather than a single unit.
func (s WorkerSpec) isGroup() bool { return len(s.Ranks) >= 2 }

// rankUnits names the units of every rank of s, rank 0 first.
func (s WorkerSpec) rankUnits() []string {
	units := make([]string, max(1, len(s.Ranks)))
	units[0] = UnitName(s.Pool, s.Slot)
	for r := 1; r < len(units); r++ {
		units[r] = RankUnitName(s.Pool, s.Slot, r)
	}
	return units
}

// groupProperties are the dependencies that bind the ranks together.
func (s WorkerSpec) groupProperties(rank int) []sddbus.Property {
	if !s.isGroup() {
		return nil
	}
	units := s.rankUnits()
	if rank == 0 {
		return []sddbus.Property{prop("BindsTo", units[1:])}
	}
	return []sddbus.Property{prop("BindsTo", units[:1])}
}

// auxUnit is one auxiliary unit of StartTransientUnit, D-Bus (sa(sv)).
type auxUnit struct {
	Name       string
	Properties []sddbus.Property
}

// groupSettleMax is the longest pause between two reads of a starting
// group's ranks.
const groupSettleMax = 100 * time.Millisecond

// startGroup starts every rank of s in one transaction and, unless
// s.NotifyReady, waits for all their start jobs. If any rank did not
// start, every rank still up is stopped and the error names the first
// rank that failed, with its Result and exit status (a *StartError).
func (m *Manager) startGroup(ctx context.Context, s WorkerSpec) error {
	units := s.rankUnits()
	main, err := s.RankProperties(0)
	if err != nil {
		return fmt.Errorf("starting %s: %w", units[0], err)
	}
	aux := make([]auxUnit, 0, len(units)-1)
	for r := 1; r < len(units); r++ {
		p, err := s.RankProperties(r)
		if err != nil {
			return fmt.Errorf("starting %s: %w", units[r], err)
		}
		aux = append(aux, auxUnit{units[r], p})
	}
	if err := m.startTransientGroup(ctx, units, main, aux); err != nil {
		return err
	}
	if s.NotifyReady {
		return m.awaitJobRunning(ctx, units)
	}
	st, err := m.settleGroup(ctx, units)
	if err != nil {
		m.stopGroup(ctx, units)
		return fmt.Errorf("starting %s: %w", units[0], err)
	}
	if allActive(st) {
		return nil
	}
	m.stopGroup(ctx, units)
	r, w := m.culprit(ctx, units, st)
	if len(s.StartCondition) > 0 && w.ActiveState != "failed" {
		return fmt.Errorf("starting %s: rank %d (%s): %w (ExecCondition %q)", units[0], r, units[r], ErrConditionSkipped, s.StartCondition)
	}
	e := &StartError{Unit: units[r], Rank: r, JobResult: "failed", Result: w.Result, ExitStatus: w.ExecMainStatus}
	if w.ActiveState != "failed" {
		e.JobResult = "done, then " + w.ActiveState
	}
	return fmt.Errorf("starting gang group %s: rank %d did not start, so no rank runs: %w", units[0], r, e)
}

func allActive(st []sddbus.UnitStatus) bool {
	for _, u := range st {
		if u.LoadState != "loaded" || u.ActiveState != "active" {
			return false
		}
	}
	return true
}

// culprit finds the rank that kept a settled group from running, reading
// the ranks that are not active: the one that failed first (the others may
// have failed of its failure: a start job that fails fails those of the
// ranks bound to it, and a stop in mid-start can end "failed" too), else
// the first that is not active (it exited at once, or its start condition
// skipped it).
func (m *Manager) culprit(ctx context.Context, units []string, st []sddbus.UnitStatus) (int, Worker) {
	members := make([]Worker, len(units))
	for r, u := range st {
		members[r] = Worker{Unit: units[r], Rank: r, ActiveState: u.ActiveState}
		if u.LoadState != "loaded" {
			members[r].ActiveState = "inactive"
		}
		if members[r].ActiveState == "active" || u.LoadState != "loaded" {
			continue
		}
		if w, found, err := m.readWorker(ctx, units[r]); err == nil && found {
			w.Rank = r
			members[r] = w
		}
	}
	r := firstDown(members)
	return r, members[r]
}

// firstDown is the rank of members (a settled group, not all active) to
// blame: the failed one that went down first, else the first not active.
func firstDown(members []Worker) int {
	if r := FirstFailed(members); r >= 0 {
		return r
	}
	return max(slices.IndexFunc(members, func(w Worker) bool { return w.ActiveState != "active" }), 0)
}

// startTransientGroup makes the call. go-systemd's StartTransientUnit
// sends no auxiliary units, so this one is made on the bus directly. A
// leftover of a failed group (UnitExists) is reset and the call retried.
func (m *Manager) startTransientGroup(ctx context.Context, units []string, main []sddbus.Property, aux []auxUnit) error {
	start := func() error {
		return m.call(ctx, "starting "+units[0], func(c *conn) error {
			return c.bus.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1").CallWithContext(ctx,
				"org.freedesktop.systemd1.Manager.StartTransientUnit", 0, units[0], "fail", main, aux).Err
		})
	}
	err := start()
	// A stopped rank may linger loaded for a moment after its reset, until
	// systemd's garbage collection unloads it: a few quick retries.
	for try := 0; try < 3 && err != nil && dbusErrorName(err) == errUnitExists; try++ {
		if rerr := m.ResetFailed(ctx, units[0]); rerr != nil && dbusErrorName(rerr) != errNoSuchUnit {
			return fmt.Errorf("starting %s: %w (and %v)", units[0], err, rerr)
		}
		for _, u := range units[1:] {
			if !isRankUnit(u) {
				// A worker's failed socket: ResetFailed resets only ranks.
				_ = m.resetFailed(ctx, u)
			}
		}
		if try > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("starting %s: %w", units[0], err)
			case <-time.After(time.Duration(try) * 50 * time.Millisecond):
			}
		}
		err = start()
	}
	if err != nil && dbusErrorName(err) == errUnitExists {
		return fmt.Errorf("%w: %s: %s: %v", ErrUnitExists, units[0], m.groupStates(ctx, units), err)
	}
	return err
}

func isRankUnit(name string) bool {
	_, _, _, ok := ParseRankUnitName(name)
	return ok
}

// settleGroup reads the ranks' states until none has a job left.
func (m *Manager) settleGroup(ctx context.Context, units []string) ([]sddbus.UnitStatus, error) {
	return m.pollUnits(ctx, units, "the ranks' start jobs", func(u sddbus.UnitStatus) bool { return u.JobId != 0 })
}

// pollUnits reads the units' states until none is waiting (by waiting),
// at 5 ms doubling to groupSettleMax, and returns the last reading.
func (m *Manager) pollUnits(ctx context.Context, units []string, what string, waiting func(sddbus.UnitStatus) bool) ([]sddbus.UnitStatus, error) {
	delay := 5 * time.Millisecond
	for {
		st, err := m.rankStatus(ctx, units)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(st, waiting) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, groupSettleMax)
	}
}

// rankStatus reads the units' states, in the order of units.
func (m *Manager) rankStatus(ctx context.Context, units []string) ([]sddbus.UnitStatus, error) {
	var st []sddbus.UnitStatus
	err := m.call(ctx, "reading the ranks of "+units[0], func(c *conn) error {
		var err error
		st, err = c.ListUnitsByNamesContext(ctx, units)
		return err
	})
	if err != nil {
		return nil, err
	}
	byName := make(map[string]sddbus.UnitStatus, len(st))
	for _, u := range st {
		byName[u.Name] = u
	}
	out := make([]sddbus.UnitStatus, len(units))
	for i, u := range units {
		out[i] = byName[u] // zero (not loaded) if systemd left it out
		out[i].Name = u
	}
	return out, nil
}

// stopGroup queues a stop of every rank of a group that did not start.
// It does not wait: a stopping rank is listed "deactivating", which keeps
// its slot taken until it is gone. Errors are moot (a rank already gone
// cannot be stopped) and dropped.
func (m *Manager) stopGroup(ctx context.Context, units []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CallTimeout)
	defer cancel()
	for _, u := range units {
		_ = m.call(ctx, "stopping "+u, func(c *conn) error {
			_, err := c.StopUnitContext(ctx, u, "replace", nil)
			return err
		})
	}
}

// groupStates is "rank 0 active/running, rank 1 failed/failed, ..." for
// error messages.
func (m *Manager) groupStates(ctx context.Context, units []string) string {
	st, err := m.rankStatus(ctx, units)
	if err != nil {
		return "unknown state"
	}
	parts := make([]string, len(st))
	for r, u := range st {
		state := u.ActiveState + "/" + u.SubState
		if u.LoadState != "loaded" {
			state = "not loaded"
		}
		parts[r] = fmt.Sprintf("rank %d %s", r, state)
	}
	return strings.Join(parts, ", ")
}

// serviceProperties reads a unit's Service properties.
func (m *Manager) serviceProperties(ctx context.Context, unit string) (map[string]any, error) {
	var svc map[string]any
	err := m.call(ctx, "reading "+unit, func(c *conn) error {
		var err error
		svc, err = c.GetUnitTypePropertiesContext(ctx, unit, "Service")
		return err
	})
	return svc, err
}

const errNoSuchUnit = "org.freedesktop.systemd1.NoSuchUnit"

// ResetFailed clears a failed unit's state so that systemd unloads it and
// its name can be used again. For rank 0 of a gang group (any UnitName),
// it also resets the group's failed ranks, found by one listing, so that
// the slot is free again; rank 0 may then be gone already (a crashed rank
// leaves it inactive, and unloaded) without that being an error.
func (m *Manager) ResetFailed(ctx context.Context, unit string) error {
	err := m.resetFailed(ctx, unit)
	pool, slot, ok := ParseUnitName(unit)
	if !ok {
		return err
	}
	ranks, lerr := m.listRanks(ctx, pool, slot)
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	reset := 0
	for _, r := range ranks {
		if r.ActiveState != "failed" {
			continue
		}
		if rerr := m.resetFailed(ctx, r.Name); rerr != nil {
			return errors.Join(err, rerr)
		}
		reset++
	}
	if reset > 0 && dbusErrorName(err) == errNoSuchUnit {
		return nil
	}
	return err
}

func (m *Manager) resetFailed(ctx context.Context, unit string) error {
	return m.call(ctx, "resetting failed "+unit, func(c *conn) error {
		return c.ResetFailedUnitContext(ctx, unit)
	})
}

// listRanks lists the loaded units of the ranks >= 1 of slot.
func (m *Manager) listRanks(ctx context.Context, pool string, slot int) ([]unitStatus, error) {
	var units []unitStatus
	err := m.call(ctx, "listing the ranks of "+UnitName(pool, slot), func(c *conn) error {
		var err error
		units, err = listUnits(ctx, c.bus, fmt.Sprintf("%s%s@%d%s*%s", unitPrefix, pool, slot, rankMarker, unitSuffix))
		return err
	})
	if err != nil {
		return nil, err
	}
	ranks := units[:0]
	for _, u := range units {
		if _, _, rank, ok := ParseRankUnitName(u.Name); ok && rank > 0 && u.LoadState == "loaded" {
			ranks = append(ranks, u)
		}
	}
	return ranks, nil
}

// stopRanks stops the ranks of a group whose rank 0 is gone (a listed
// Worker with Missing set), for StopWorker of rank 0. ok is false if
// there is none to stop. The channel receives "done" once every rank's
// stop job is done, or the first other result.
func (m *Manager) stopRanks(ctx context.Context, unit string) (<-chan string, bool) {
	pool, slot, ok := ParseUnitName(unit)
	if !ok {
		return nil, false
	}
	ranks, err := m.listRanks(ctx, pool, slot)
	if err != nil {
		return nil, false
	}
	var jobs []chan string
	for _, r := range ranks {
		if r.ActiveState == "inactive" || r.ActiveState == "failed" {
			continue
		}
		ch := make(chan string, 1)
		err := m.call(ctx, "stopping "+r.Name, func(c *conn) error {
			_, err := c.StopUnitContext(ctx, r.Name, "replace", ch)
			return err
		})
		if err == nil {
			jobs = append(jobs, ch)
		}
	}
	if len(jobs) == 0 {
		return nil, false
	}
	out := make(chan string, 1)
	go func() {
		result := "done"
		for _, ch := range jobs {
			select {
			case r := <-ch:
				if result == "done" {
					result = r
				}
			case <-m.life.Done():
				return // closed: nothing arrives, as for any job
			}
		}
		out <- result
	}()
	return out, true
}
