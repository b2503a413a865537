package units

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
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
	// InactiveEnterMono is when the unit last became inactive or failed,
	// on CLOCK_MONOTONIC (zero if never): of a group's ranks, the one
	// that went down first is the one that brought the group down.
	InactiveEnterMono time.Duration

	// Environment is the unit's Environment= (KEY=VALUE) as it was
	// started: a service replica's ports are read back from it after a
	// daemon restart, never picked again.
	Environment []string
	// Rank is the worker's rank in its gang group (0 for rank 0 and for a
	// single unit); Ranks are the other ranks (1 … N-1) as listed, sorted
	// by rank, on the rank-0 Worker only. ListWorkers returns rank 0 only,
	// the others in its Ranks.
	//
	// The rank-0 Worker of a group speaks for the group: its ActiveState
	// and SubState are the group's (groupState): "active" when every rank
	// is active; "activating" while every rank is up and one is still
	// starting (NotifyReady: not every rank has sent READY=1);
	// "deactivating" while any rank is up and another is not (BindsTo= is
	// stopping the group, or a rank is stopping); else "failed" if a rank
	// failed, with Result, ExecMainCode and ExecMainStatus of the rank that
	// went down first (FailedRank), or "inactive". So a pool that knows
	// nothing of groups sees a rank's crash as one crash of its slot, and
	// the slot taken until every rank is gone; ResetFailed of rank 0 resets
	// the failed ranks too. Rank 0's own states are UnitActiveState and
	// UnitSubState.
	//
	// A rank listed without its rank 0 comes in Ranks of a rank-0 Worker
	// made up for it, with Missing set: only Unit (rank 0's name), Pool,
	// Slot, Ranks and the group's states are set. It is rare: systemd (252)
	// keeps rank 0 loaded, if inactive, for as long as a rank bound to it
	// is loaded (still stopping, or failed and kept for its Result).
	Rank  int
	Ranks []Worker
	// FailedRank is, for a failed group, the rank that failed first.
	FailedRank int
	// UnitActiveState and UnitSubState are the unit's own states, which
	// for rank 0 of a group may differ from ActiveState and SubState.
	UnitActiveState, UnitSubState string
	// Missing says that rank 0's own unit is not loaded: the Worker stands
	// for the ranks in Ranks.
	Missing bool
}

// listConcurrency bounds the property reads of one ListWorkers: enough to
// hide round-trip latency for a few hundred workers without flooding the bus.
const listConcurrency = 8

// ListWorkers lists the loaded worker units of pool ("" = every pool) in
// any state, failed ones included, sorted by pool and slot, a gang group's
// ranks folded into its rank 0 (Worker.Ranks). It costs one
// ListUnitsByPatterns call, plus a read of the properties of each unit
// (rank) that is not running under the invocation last read (cache.go).
func (m *Manager) ListWorkers(ctx context.Context, pool string) ([]Worker, error) {
	pattern := unitPrefix + "*@*" + unitSuffix
	if pool != "" {
		if !poolRE.MatchString(pool) {
			return nil, fmt.Errorf("listing workers: invalid pool name %q", pool)
		}
		pattern = unitPrefix + pool + "@*" + unitSuffix
	}
	var units []unitStatus
	err := m.call(ctx, "listing workers", func(c *conn) error {
		var err error
		// No state filter: every loaded unit, failed ones included.
		units, err = listUnits(ctx, c.bus, pattern)
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
	m.running.sync()
	workers = make([]Worker, 0, len(units))
	listed := make(map[string]bool, len(units))
	for _, u := range units {
		p, slot, rank, ok := ParseRankUnitName(u.Name)
		if !ok || (pool != "" && p != pool) || u.LoadState != "loaded" {
			continue
		}
		listed[u.Name] = true
		if w, ok := m.running.get(u.Name, u.ActiveState, u.SubState, u.Description); ok {
			w.Pool, w.Slot, w.Rank = p, slot, rank
			mu.Lock()
			workers = append(workers, w)
			mu.Unlock()
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
				w.Pool, w.Slot, w.Rank = p, slot, rank
				workers = append(workers, w)
				m.running.put(w)
			}
		}()
	}
	wg.Wait()
	prefix := unitPrefix
	if pool != "" {
		prefix = unitPrefix + pool + "@"
	}
	m.running.prune(prefix, listed)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return FoldRanks(workers), nil
}

// FoldRanks sorts a listing by pool, slot and rank, and folds each gang
// group's ranks into its rank-0 Worker (see Worker.Ranks).
func FoldRanks(workers []Worker) []Worker {
	// Not sort.Slice, whose reflective swaps of these large structs were a
	// tenth of a tick's CPU at 500 workers.
	slices.SortFunc(workers, func(a, b Worker) int {
		return cmp.Or(strings.Compare(a.Pool, b.Pool), cmp.Compare(a.Slot, b.Slot), cmp.Compare(a.Rank, b.Rank))
	})
	out := workers[:0]
	for i := 0; i < len(workers); {
		j := i + 1
		for j < len(workers) && workers[j].Pool == workers[i].Pool && workers[j].Slot == workers[i].Slot {
			j++
		}
		head := workers[i]
		head.UnitActiveState, head.UnitSubState = head.ActiveState, head.SubState
		ranks := workers[i+1 : j]
		if head.Rank != 0 {
			head = Worker{Unit: UnitName(head.Pool, head.Slot), Pool: head.Pool, Slot: head.Slot, Missing: true,
				ActiveState: "inactive", SubState: "dead"}
			ranks = workers[i:j]
		}
		if len(ranks) > 0 {
			// A copy: out overwrites workers as it goes.
			head.Ranks = slices.Clone(ranks)
			groupState(&head)
		}
		out = append(out, head)
		i = j
	}
	return out
}

// groupState sets the states of a group's rank-0 Worker to the group's
// (see Worker.Ranks).
func groupState(w *Worker) {
	members := append([]Worker{*w}, w.Ranks...)
	var up, active, stopping int
	for _, m := range members {
		switch m.ActiveState {
		case "active", "reloading":
			up++
			active++
		case "activating":
			up++
		case "deactivating":
			up++
			stopping++
		}
	}
	switch {
	case active == len(members):
	case up == len(members) && stopping == 0:
		w.ActiveState, w.SubState = "activating", "start"
	case up > 0:
		w.ActiveState, w.SubState = "deactivating", "stop"
	default:
		first := FirstFailed(members)
		if first < 0 {
			w.ActiveState, w.SubState = "inactive", "dead"
			return
		}
		f := members[first]
		w.ActiveState, w.SubState, w.FailedRank = "failed", "failed", f.Rank
		w.Result, w.ExecMainCode, w.ExecMainStatus = f.Result, f.ExecMainCode, f.ExecMainStatus
	}
}

// FirstFailed is the index in members (a gang group's ranks, each as its
// own unit) of the failed one that went down first, by its
// InactiveEnterMono, the lower index on a tie; -1 if none failed. That
// rank brought the group down: BindsTo= stops the others after it, and
// one that fails at that stop (a non-zero exit on SIGTERM) fails later.
func FirstFailed(members []Worker) int {
	first := -1
	for i, m := range members {
		if m.ActiveState == "failed" && (first < 0 || m.InactiveEnterMono < members[first].InactiveEnterMono) {
			first = i
		}
	}
	return first
}

// readWorker reads a unit's Unit and Service properties in one call. found
// is false if the unit was unloaded since it was listed: systemd then
// answers for a fresh "not-found" stub rather than with an error.
func (m *Manager) readWorker(ctx context.Context, unit string) (Worker, bool, error) {
	var p map[string]any
	m.propertyReads.Add(1)
	err := m.call(ctx, "reading "+unit, func(c *conn) error {
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
	w.Environment, _ = p["Environment"].([]string)
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
	if us, _ := p["InactiveEnterTimestampMonotonic"].(uint64); us > 0 {
		w.InactiveEnterMono = time.Duration(us) * time.Microsecond
	}
	return w, true, nil
}

// unitStatus is the part of ListUnitsByPatterns' answer that ListWorkers
// uses.
type unitStatus struct {
	Name, Description, LoadState, ActiveState, SubState string
}

// listUnits calls ListUnitsByPatterns itself and takes the fields it needs
// from the decoded message with type assertions. go-systemd's own method
// stores every field of every unit through reflection, twice: at 500
// workers that was two thirds of the daemon's CPU per tick once the
// properties were cached.
func listUnits(ctx context.Context, bus *dbus.Conn, pattern string) ([]unitStatus, error) {
	call := bus.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1").CallWithContext(ctx,
		"org.freedesktop.systemd1.Manager.ListUnitsByPatterns", 0, []string{}, []string{pattern})
	if call.Err != nil {
		return nil, call.Err
	}
	// a(ssssssouso): godbus decodes each struct to a []any.
	var rows [][]any
	ok := len(call.Body) == 1
	if ok {
		rows, ok = call.Body[0].([][]any)
	}
	if !ok {
		return nil, fmt.Errorf("ListUnitsByPatterns: unexpected reply of type %T", call.Body)
	}
	out := make([]unitStatus, 0, len(rows))
	for _, r := range rows {
		var u unitStatus
		ok := len(r) >= 5
		for i, dst := range []*string{&u.Name, &u.Description, &u.LoadState, &u.ActiveState, &u.SubState} {
			if !ok {
				break
			}
			*dst, ok = r[i].(string)
		}
		if !ok {
			return nil, fmt.Errorf("ListUnitsByPatterns: unexpected unit record %v", r)
		}
		out = append(out, u)
	}
	return out, nil
}
