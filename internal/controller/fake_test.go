package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/capacity"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// fakeSystemd keeps units the way PID 1 does, as far as a pool can tell:
// a start of a name that is loaded and not failed is refused with
// UnitExists; a stop leaves the unit deactivating until the test finishes it;
// a failed unit stays loaded until reset.
type fakeSystemd struct {
	mu     sync.Mutex
	units  map[string]*units.Worker
	specs  map[string]units.WorkerSpec
	starts []string
	stops  []string
	// failStart makes every start fail with this unit Result and status.
	failStart *units.StartError
	// stopNow makes a stop finish at once (the unit is unloaded).
	stopNow bool
	nextInv int
	listErr error
	// Issue 9 (readiness_test.go): the states of the units workers
	// require, a failing start condition, the signals sent by KillMain.
	deps      map[string]string
	condFails bool
	kills     []string
	killErr   error
}

func newFakeSystemd() *fakeSystemd {
	return &fakeSystemd{units: map[string]*units.Worker{}, specs: map[string]units.WorkerSpec{}}
}

func (f *fakeSystemd) ListWorkers(ctx context.Context, pool string) ([]units.Worker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	// As units.Manager lists gang groups: folded by its own FoldRanks,
	// rank 0 standing for its group with the group's states, a rank whose
	// rank 0 is not loaded under a stand-in rank 0.
	var out []units.Worker
	for _, w := range f.units {
		if w.Pool == pool {
			out = append(out, *w)
		}
	}
	return units.FoldRanks(out), nil
}

func (f *fakeSystemd) StartWorker(ctx context.Context, s units.WorkerSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := units.UnitName(s.Pool, s.Slot)
	if w, ok := f.units[name]; ok && w.ActiveState != "failed" {
		return fmt.Errorf("%w: %s is %s", units.ErrUnitExists, name, w.ActiveState)
	}
	f.starts = append(f.starts, name)
	if f.condFails && len(s.StartCondition) > 0 {
		// systemd skips the unit and unloads it at once.
		return fmt.Errorf("starting %s: %w", name, units.ErrConditionSkipped)
	}
	for r := 1; r < len(s.Ranks); r++ {
		rn := units.RankUnitName(s.Pool, s.Slot, r)
		if w, ok := f.units[rn]; ok && w.ActiveState != "failed" {
			return fmt.Errorf("%w: %s is %s", units.ErrUnitExists, rn, w.ActiveState)
		}
	}
	if f.failStart != nil {
		// A group starts all or nothing: the rank that failed stays
		// loaded, failed; the others are stopped and unloaded.
		e := *f.failStart
		failed := name
		if e.Unit != "" {
			failed = e.Unit
		}
		e.Unit = failed
		rank := 0
		if failed != name {
			_, _, rank = parseRankUnit(failed)
		}
		f.units[failed] = &units.Worker{Unit: failed, Pool: s.Pool, Slot: s.Slot, Rank: rank, ActiveState: "failed", Result: e.Result, ExecMainCode: 1, ExecMainStatus: e.ExitStatus}
		return &e
	}
	f.nextInv++
	state := "active"
	if s.NotifyReady {
		// Type=notify: activating until READY=1 (activate).
		state = "activating"
	}
	f.units[name] = &units.Worker{Unit: name, Pool: s.Pool, Slot: s.Slot, ActiveState: state, SubState: "running",
		Result: "success", InvocationID: fmt.Sprintf("%032x", f.nextInv), Description: descriptionOf(s), Revision: s.Revision,
		Environment: rankEnvironment(s, 0)}
	f.specs[name] = s
	for r := 1; r < len(s.Ranks); r++ {
		f.nextInv++
		rn := units.RankUnitName(s.Pool, s.Slot, r)
		f.units[rn] = &units.Worker{Unit: rn, Pool: s.Pool, Slot: s.Slot, Rank: r, ActiveState: "active", SubState: "running",
			Result: "success", InvocationID: fmt.Sprintf("%032x", f.nextInv), Description: descriptionOf(s), Revision: s.Revision,
			Environment: rankEnvironment(s, r)}
	}
	return nil
}

// rankEnvironment is the Environment= that rank r of s is started with,
// as systemd lists it back: the spec's, then the rank's, KEY=VALUE sorted.
func rankEnvironment(s units.WorkerSpec, r int) []string {
	env := maps.Clone(s.Environment)
	if env == nil {
		env = map[string]string{}
	}
	if r < len(s.Ranks) {
		maps.Copy(env, s.Ranks[r].Environment)
	}
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// parseRankUnit reads flexiq-POOL@SLOT-rR.service.
func parseRankUnit(unit string) (pool string, slot, rank int) {
	_, err := fmt.Sscanf(strings.NewReplacer("flexiq-", "", "@", " ", "-r", " ", ".service", "").Replace(unit), "%s %d %d", &pool, &slot, &rank)
	if err != nil {
		panic(fmt.Sprintf("not a rank unit: %s", unit))
	}
	return pool, slot, rank
}

func descriptionOf(s units.WorkerSpec) string {
	d := fmt.Sprintf("flexiq-scaled worker %s/%d", s.Pool, s.Slot)
	if s.Revision != "" {
		d += " rev " + s.Revision
	}
	return d
}

func (f *fakeSystemd) StopWorker(ctx context.Context, unit string) (<-chan string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan string, 1)
	w, ok := f.units[unit]
	if !ok {
		return nil, fmt.Errorf("unit %s not loaded", unit)
	}
	f.stops = append(f.stops, unit)
	// A gang group's ranks are bound to its rank 0: they stop with it.
	group := []*units.Worker{w}
	if w.Rank == 0 {
		for _, o := range f.units {
			if o.Pool == w.Pool && o.Slot == w.Slot && o.Rank > 0 && o.ActiveState != "failed" {
				group = append(group, o)
			}
		}
	}
	for _, g := range group {
		if f.stopNow {
			delete(f.units, g.Unit)
			continue
		}
		g.ActiveState, g.SubState = "deactivating", "stop-sigterm"
	}
	if f.stopNow {
		ch <- "done"
	}
	return ch, nil
}

func (f *fakeSystemd) ResetFailed(ctx context.Context, unit string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w, ok := f.units[unit]; ok && w.ActiveState == "failed" {
		delete(f.units, unit)
	}
	return nil
}

func (f *fakeSystemd) CPUUsage(w units.Worker) (time.Duration, error) { return 0, nil }

// finish ends a unit's stop: result "success" unloads it; anything else
// leaves it failed with that Result, as a SIGKILL at the stop timeout does.
func (f *fakeSystemd) finish(unit, result string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if result == "success" {
		delete(f.units, unit)
		return
	}
	if w, ok := f.units[unit]; ok {
		w.ActiveState, w.Result = "failed", result
		w.ExecMainCode, w.ExecMainStatus = 2, 9
	}
}

// set puts a unit in a state by hand, as an admin or a crash would.
func (f *fakeSystemd) set(unit, state, result string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if state == "" {
		delete(f.units, unit)
		return
	}
	w := f.units[unit]
	w.ActiveState, w.Result = state, result
}

// count is the number of the pool's units in the given states.
func (f *fakeSystemd) count(states ...string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, w := range f.units {
		if slices.Contains(states, w.ActiveState) {
			n++
		}
	}
	return n
}

func (f *fakeSystemd) unitsIn(state string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for name, w := range f.units {
		if w.ActiveState == state {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// fakeSource returns whatever the test sets.
type fakeSource struct {
	mu     sync.Mutex
	counts source.Counts
	err    error
}

func (s *fakeSource) Observe(ctx context.Context, now time.Time) (source.Counts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts, s.err
}
func (s *fakeSource) Close() error { return nil }

func (s *fakeSource) set(pending, running int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts, s.err = source.Counts{Pending: pending, Running: running}, err
}

// fakeClock is a monotonic clock that moves only when told.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) advance(d time.Duration) { c.now = c.now.Add(d) }

// rig is one pool wired to the fakes, with its journal in a buffer.
type rig struct {
	t     *testing.T
	sd    *fakeSystemd
	src   *fakeSource
	clock *fakeClock
	log   *syncBuffer
	pool  *Pool
	cfg   *config.Pool
	dir   string
	// ledger is the host budget the pool shares; nil grants every start.
	ledger *capacity.Ledger
	// tweak, when set, adjusts the Options of every pool the rig makes
	// (a service pool's prober and command runner).
	tweak func(*Options)
}

func testPool(name string) *config.Pool {
	return &config.Pool{
		Name: name, Exec: []string{"/bin/worker"}, User: "flexiq",
		MinWorkers: 1, MaxWorkers: 10, TargetQueueDepthPerWorker: 10, TargetUtilisation: 1,
		ThreadsPerWorker: 1, CPUPerWorker: 1, Tolerance: 0.1, ScaleDownWindow: 300 * time.Second,
		PollInterval: time.Second, DrainTimeout: 30 * time.Second, DrainSignal: "SIGTERM", DrainSignalNumber: 15,
		Source: config.Source{Type: "flexiq-sqlite", Settings: source.FlexiqSQLiteSettings{Path: "/var/lib/q.db"}}, MaxSurge: 1,
	}
}

func newRig(t *testing.T, cfg *config.Pool) *rig {
	r := &rig{t: t, sd: newFakeSystemd(), src: &fakeSource{}, clock: &fakeClock{now: monoTime(1000 * time.Hour)}, log: &syncBuffer{}, cfg: cfg, dir: t.TempDir()}
	r.pool = r.newPool()
	return r
}

// newPool is a new daemon's pool on the same systemd, source and state dir.
func (r *rig) newPool() *Pool {
	r.t.Helper()
	opts := Options{
		StateDir: r.dir, Clock: r.clock.Now,
		NewSource: func(config.Source) (source.Source, error) { return r.src, nil },
		Ledger:    r.ledger,
	}
	if r.tweak != nil {
		r.tweak(&opts)
	}
	p, err := NewPool(r.cfg, r.sd, eventlog.NewWriter(r.log), opts)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

// start runs Start with the units systemd has now, as the daemon does.
func (r *rig) start(p *Pool) {
	r.t.Helper()
	existing, _ := r.sd.ListWorkers(context.Background(), p.name)
	p.Start(context.Background(), existing)
}

func (r *rig) tick(after time.Duration) {
	r.t.Helper()
	r.clock.advance(after)
	r.pool.Tick(context.Background())
}

// journal lines containing all of the given substrings.
func (r *rig) lines(subs ...string) []string {
	var out []string
	for _, l := range strings.Split(r.log.String(), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// ControlGroup is where systemd would put the unit.
func (f *fakeSystemd) ControlGroup(ctx context.Context, unit string) (string, error) {
	return "/flexiq.slice/" + unit, nil
}
