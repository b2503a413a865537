package units

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// Worker is a worker unit as systemd sees it right now.
type Worker struct {
	Unit string
	Pool string
	Slot int

	// Description is the unit's; Revision the WorkerSpec.Revision it was
	// started with, as ParseRevision reads it from the Description.
	Description, Revision string

	ActiveState, SubState string
	Result                string // "success", "exit-code", "timeout", ...

	MainPID      uint32
	InvocationID string // 32 hex digits; changes on every (re)start of the unit
	ControlGroup string // relative to the cgroup root, e.g. /flexiq.slice/flexiq-email.slice/flexiq-email@1.service

	// How the main process last exited: ExecMainCode is CLD_EXITED=1,
	// CLD_KILLED=2 or CLD_DUMPED=3, ExecMainStatus the exit status or signal.
	ExecMainCode, ExecMainStatus int32

	ActiveEnter time.Time // zero if the unit never became active
	// ActiveEnterMono is the same moment on CLOCK_MONOTONIC (zero if never
	// active): unlike ActiveEnter it cannot jump with the wall clock.
	ActiveEnterMono time.Duration
}

// listConcurrency bounds the property reads of one ListWorkers: enough to
// hide round-trip latency for a few hundred workers without flooding the bus.
const listConcurrency = 8

// ListWorkers lists the loaded worker units of pool ("" = every pool) in
// any state, failed ones included, sorted by pool and slot.
func (m *Manager) ListWorkers(ctx context.Context, pool string) ([]Worker, error) {
	pattern := unitPrefix + "*@*" + unitSuffix
	if pool != "" {
		if !poolRE.MatchString(pool) {
			return nil, fmt.Errorf("listing workers: invalid pool name %q", pool)
		}
		pattern = unitPrefix + pool + "@*" + unitSuffix
	}
	var units []sddbus.UnitStatus
	err := m.call(ctx, "listing workers", func(c *sddbus.Conn) error {
		var err error
		// No state filter: every loaded unit, failed ones included.
		units, err = c.ListUnitsByPatternsContext(ctx, nil, []string{pattern})
		return err
	})
	if err != nil {
		return nil, err
	}

	var (
		mu      sync.Mutex
		workers []Worker
		errs    []error
		wg      sync.WaitGroup
		sem     = make(chan struct{}, listConcurrency)
	)
	for _, u := range units {
		p, slot, ok := ParseUnitName(u.Name)
		if !ok || (pool != "" && p != pool) || u.LoadState != "loaded" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			w, found, err := m.readWorker(ctx, u.Name)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case found:
				w.Pool, w.Slot = p, slot
				workers = append(workers, w)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	sort.Slice(workers, func(i, j int) bool {
		if workers[i].Pool != workers[j].Pool {
			return workers[i].Pool < workers[j].Pool
		}
		return workers[i].Slot < workers[j].Slot
	})
	return workers, nil
}

// readWorker reads a unit's Unit and Service properties in one call. found
// is false if the unit was unloaded since it was listed: systemd then
// answers for a fresh "not-found" stub rather than with an error.
func (m *Manager) readWorker(ctx context.Context, unit string) (Worker, bool, error) {
	var p map[string]any
	err := m.call(ctx, "reading "+unit, func(c *sddbus.Conn) error {
		var err error
		// An empty interface name asks for every interface's properties.
		p, err = c.GetAllPropertiesContext(ctx, unit)
		return err
	})
	if err != nil {
		return Worker{}, false, err
	}
	if s, _ := p["LoadState"].(string); s != "loaded" {
		return Worker{}, false, nil
	}
	w := Worker{Unit: unit}
	w.Description, _ = p["Description"].(string)
	w.Revision = ParseRevision(w.Description)
	w.ActiveState, _ = p["ActiveState"].(string)
	w.SubState, _ = p["SubState"].(string)
	w.Result, _ = p["Result"].(string)
	w.MainPID, _ = p["MainPID"].(uint32)
	w.ControlGroup, _ = p["ControlGroup"].(string)
	w.ExecMainCode, _ = p["ExecMainCode"].(int32)
	w.ExecMainStatus, _ = p["ExecMainStatus"].(int32)
	if id, _ := p["InvocationID"].([]byte); len(id) > 0 {
		w.InvocationID = hex.EncodeToString(id)
	}
	if us, _ := p["ActiveEnterTimestamp"].(uint64); us > 0 {
		w.ActiveEnter = time.UnixMicro(int64(us))
	}
	if us, _ := p["ActiveEnterTimestampMonotonic"].(uint64); us > 0 {
		w.ActiveEnterMono = time.Duration(us) * time.Microsecond
	}
	return w, true, nil
}
