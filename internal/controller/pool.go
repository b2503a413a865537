// Package controller runs one pool: at each tick it reads the queue and the
// workers' CPU, asks the policy for a decision, and starts or drains worker
// units to follow it. It holds the pool's runtime state; the decision itself
// lives in package policy and the D-Bus calls in package units.
package controller

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Crash backoff per slot: 1 s doubling to 60 s, so that a crash loop never
// spins. A worker that stayed up this long before crashing starts over at 1 s.
const (
	backoffMin    = time.Second
	backoffMax    = 60 * time.Second
	backoffReset  = 60 * time.Second
	startTimeout  = 30 * time.Second // one start job, Type=exec: the exec itself
	callTimeout   = 15 * time.Second // one D-Bus round trip
	sourceLogRate = time.Minute
)

// Status is a pool's one-line summary for STATUS= and for tests.
type Status struct {
	Name         string
	Current, Max int
	Draining     int
	Pending      int64
	PendingKnown bool
}

func (s Status) String() string {
	pending := "? pending"
	if s.PendingKnown {
		pending = fmt.Sprintf("%d pending", s.Pending)
	}
	return fmt.Sprintf("%s %d/%d workers, %s", s.Name, s.Current, s.Max, pending)
}

// worker is a live worker: active or activating, not draining.
type worker struct {
	slot       int
	unit       string
	invocation string
	since      time.Time // when it became active; for the backoff reset

	// CPU accounting between ticks.
	prevUsage time.Duration
	prevAt    time.Time
	havePrev  bool
	util      float64
	utilKnown bool
}

type slotBackoff struct {
	delay time.Duration
	until time.Time
}

// Pool runs one configured pool.
type Pool struct {
	name  string
	units *units.Manager
	log   *eventlog.Logger

	mu       sync.Mutex
	cfg      *config.Pool
	src      source.Source
	rec      policy.Recommender
	live     map[int]*worker
	draining map[string]int // unit → slot, until its stop job is done
	backoff  map[int]*slotBackoff
	// target is the last decided worker count; crashed workers are
	// replaced up to it.
	target     int
	lastAction policy.Action
	srcLog     *eventlog.Throttle

	// The summary and the tick interval have their own lock: the watchdog
	// reads them, and must not wait behind a slow tick holding mu.
	summaryMu sync.Mutex
	status    Status
	poll      time.Duration

	drains   sync.WaitGroup
	progress atomic.Int64 // unix nanos of the last completed tick
}

// newPool prepares a pool; it starts nothing until Start.
func newPool(cfg *config.Pool, u *units.Manager, log *eventlog.Logger) (*Pool, error) {
	src, err := source.New(cfg.Source)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", cfg.Name, err)
	}
	p := &Pool{
		name:     cfg.Name,
		units:    u,
		log:      log,
		cfg:      cfg,
		src:      src,
		live:     map[int]*worker{},
		draining: map[string]int{},
		backoff:  map[int]*slotBackoff{},
		srcLog:   eventlog.NewThrottle(sourceLogRate),
	}
	p.status = Status{Name: cfg.Name, Max: cfg.MaxWorkers}
	p.poll = cfg.PollInterval
	p.progress.Store(time.Now().UnixNano())
	return p, nil
}

// Name is the pool's name.
func (p *Pool) Name() string { return p.name }

// Status is the pool's summary as of its last tick.
func (p *Pool) Status() Status {
	p.summaryMu.Lock()
	defer p.summaryMu.Unlock()
	return p.status
}

// LastProgress is when the pool last completed a tick (or started); the
// watchdog uses it to tell a slow pool from a wedged one.
func (p *Pool) LastProgress() time.Time { return time.Unix(0, p.progress.Load()) }

// PollInterval is the pool's current tick interval.
func (p *Pool) PollInterval() time.Duration {
	p.summaryMu.Lock()
	defer p.summaryMu.Unlock()
	return p.poll
}

// Start adopts the pool's running workers (from a previous daemon) and brings
// the pool to at least min_workers.
func (p *Pool) Start(ctx context.Context, existing []units.Worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.reconcile(ctx, now, existing)
	p.target = max(len(p.live), p.cfg.MinWorkers)
	if len(p.live) > 0 {
		p.log.Event(eventlog.Lifecycle, eventlog.Info, p.fields(nil), "pool=%s adopted %d running workers", p.name, len(p.live))
	}
	p.startUpTo(ctx, now, p.target, "min_workers")
	p.updateStatus(nil)
	p.progress.Store(time.Now().UnixNano())
}

// Run ticks until ctx ends.
func (p *Pool) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.PollInterval()):
		}
		p.Tick(ctx, time.Now())
	}
}

// Tick runs one control cycle at now.
func (p *Pool) Tick(ctx context.Context, now time.Time) policy.Decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer func() { p.progress.Store(time.Now().UnixNano()) }()

	lctx, cancel := context.WithTimeout(ctx, callTimeout)
	listed, err := p.units.ListWorkers(lctx, p.name)
	cancel()
	if err != nil {
		// Without the unit list the current count is unknown: act on nothing.
		p.log.Event(eventlog.Lifecycle, eventlog.Warning, p.fields(nil), "pool=%s cannot list workers: %v", p.name, err)
		return policy.Decision{Now: now, Action: policy.Hold, Current: len(p.live), Desired: len(p.live), Rationale: "hold: cannot list workers"}
	}
	p.reconcile(ctx, now, listed)
	// Crashed workers come back first, up to the last decided target.
	p.startUpTo(ctx, now, p.target, "replacing crashed worker")
	p.sampleCPU(now, listed)

	obs := policy.Observation{Current: len(p.live)}
	counts, srcErr := p.observe(ctx, now)
	if srcErr == nil {
		obs.Valid, obs.Pending = true, counts.Pending
		obs.Running = runningOnLive(counts.Running, len(p.draining), p.cfg.ThreadsPerWorker)
	}
	obs.CPU, obs.CPUKnown = p.meanUtil()
	d := p.rec.Decide(now, p.cfg.PolicyParams(), obs)
	p.logDecision(d, obs, counts.Running)

	switch d.Action {
	case policy.ScaleUp:
		p.target = d.Desired
		p.startUpTo(ctx, now, d.Desired, "scale-up")
	case policy.ScaleDown:
		p.target = d.Desired
		p.drainDownTo(ctx, d.Desired)
	case policy.Stable:
		p.target = d.Desired
	}
	if srcErr == nil {
		p.updateStatus(&counts)
	} else {
		p.updateStatus(nil)
	}
	return d
}

// observe reads the queue, bounded by the tick interval so that a slow
// database delays this pool only, and logs failures without flooding.
func (p *Pool) observe(ctx context.Context, now time.Time) (source.Counts, error) {
	timeout := min(max(p.cfg.PollInterval, time.Second), 30*time.Second)
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	counts, err := p.src.Observe(sctx, now)
	if err != nil {
		if log, suppressed := p.srcLog.Fail(now); log {
			more := ""
			if suppressed > 0 {
				more = fmt.Sprintf(" (%d more failures since the last report)", suppressed)
			}
			p.log.Event(eventlog.SourceError, eventlog.Warning, p.fields(eventlog.Fields{"FLEXIQ_ERROR": err.Error()}),
				"pool=%s source unavailable, holding at %d workers: %v%s", p.name, len(p.live), err, more)
		}
		return counts, err
	}
	if p.srcLog.OK() {
		p.log.Event(eventlog.SourceRecovered, eventlog.Notice, p.fields(nil), "pool=%s source recovered: %d pending, %d running", p.name, counts.Pending, counts.Running)
	}
	return counts, nil
}

// reconcile brings the pool's view in line with systemd's: it adopts units it
// did not know, and notices workers that stopped without being asked.
func (p *Pool) reconcile(ctx context.Context, now time.Time, listed []units.Worker) {
	seen := map[string]units.Worker{}
	for _, w := range listed {
		seen[w.Unit] = w
	}
	// Workers we counted on that are no longer running: a crash, an OOM
	// kill, or an admin's systemctl stop. Either way, not our drain.
	for slot, lw := range p.live {
		w, ok := seen[lw.unit]
		// A different invocation ID means the unit was stopped and started
		// again behind our back: the worker we started is gone.
		if ok && running(w) && (lw.invocation == "" || w.InvocationID == lw.invocation) {
			lw.invocation = w.InvocationID
			continue
		}
		delete(p.live, slot)
		p.crashed(ctx, now, lw, w, ok)
	}
	for _, w := range listed {
		if _, isDraining := p.draining[w.Unit]; isDraining {
			continue
		}
		switch {
		case running(w):
			if lw, ok := p.live[w.Slot]; !ok || lw.unit != w.Unit {
				p.live[w.Slot] = &worker{slot: w.Slot, unit: w.Unit, invocation: w.InvocationID, since: w.ActiveEnter}
			}
		case w.ActiveState == "failed":
			// A failed leftover (of a previous daemon, or one we just
			// reported): clear it so that its slot can be reused.
			rctx, cancel := context.WithTimeout(ctx, callTimeout)
			_ = p.units.ResetFailed(rctx, w.Unit)
			cancel()
		}
	}
}

func running(w units.Worker) bool {
	return w.ActiveState == "active" || w.ActiveState == "activating" || w.ActiveState == "reloading"
}

// crashed records a worker that went away on its own and arms its slot's backoff.
func (p *Pool) crashed(ctx context.Context, now time.Time, lw *worker, w units.Worker, loaded bool) {
	result, how := "success", "exited and was unloaded"
	if loaded {
		result = w.Result
		how = fmt.Sprintf("is %s (%s)", w.ActiveState, exitText(w))
	}
	// A worker that stayed up long enough earns its slot a fresh backoff.
	if !lw.since.IsZero() && now.Sub(lw.since) >= backoffReset {
		delete(p.backoff, lw.slot)
	}
	delay := p.armBackoff(lw.slot, now)
	p.log.Event(eventlog.WorkerCrashed, eventlog.Err, p.fields(eventlog.Fields{
		"FLEXIQ_SLOT": strconv.Itoa(lw.slot), "FLEXIQ_UNIT": lw.unit, "FLEXIQ_RESULT": result,
		"FLEXIQ_EXIT_STATUS": strconv.Itoa(int(w.ExecMainStatus)),
	}), "pool=%s worker %s stopped without being asked: it %s, Result=%s; slot %d may restart in %s",
		p.name, lw.unit, how, result, lw.slot, delay)
	if loaded && w.ActiveState == "failed" {
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		_ = p.units.ResetFailed(rctx, w.Unit)
		cancel()
	}
}

func exitText(w units.Worker) string {
	switch w.ExecMainCode {
	case 1:
		return fmt.Sprintf("exit status %d", w.ExecMainStatus)
	case 2, 3:
		return fmt.Sprintf("killed by signal %d", w.ExecMainStatus)
	}
	return "no exit status"
}

// armBackoff keeps slot from being started again for a while after a crash
// or a failed start: 1 s, doubling with each failure in a row, up to 60 s.
// It returns the delay.
func (p *Pool) armBackoff(slot int, now time.Time) time.Duration {
	b := p.backoff[slot]
	if b == nil {
		b = &slotBackoff{}
		p.backoff[slot] = b
	}
	b.delay = min(max(b.delay*2, backoffMin), backoffMax)
	b.until = now.Add(b.delay)
	return b.delay
}

// startUpTo starts workers until the pool has want live ones, in the lowest
// free slots whose backoff has expired. Starts run in parallel; each waits
// for its own start job, bounded.
func (p *Pool) startUpTo(ctx context.Context, now time.Time, want int, why string) {
	want = min(want, p.cfg.MaxWorkers)
	n := want - len(p.live)
	if n <= 0 {
		return
	}
	slots := p.freeSlots(now, n)
	type result struct {
		slot int
		err  error
	}
	results := make(chan result, len(slots))
	for _, slot := range slots {
		spec := workerSpec(p.cfg, slot)
		go func() {
			sctx, cancel := context.WithTimeout(ctx, startTimeout)
			defer cancel()
			results <- result{slot, p.units.StartWorker(sctx, spec)}
		}()
	}
	for range slots {
		r := <-results
		unit := units.UnitName(p.name, r.slot)
		f := p.fields(eventlog.Fields{"FLEXIQ_SLOT": strconv.Itoa(r.slot), "FLEXIQ_UNIT": unit})
		if r.err != nil {
			delay := p.armBackoff(r.slot, now)
			p.log.Event(eventlog.WorkerCrashed, eventlog.Err, f, "pool=%s worker %s failed to start (%s): %v; slot %d may retry in %s", p.name, unit, why, r.err, r.slot, delay)
			continue
		}
		// Its invocation ID is learnt at the next listing.
		p.live[r.slot] = &worker{slot: r.slot, unit: unit, since: now}
		p.log.Event(eventlog.WorkerStarted, eventlog.Info, f, "pool=%s started %s (%s)", p.name, unit, why)
	}
}

// freeSlots returns the slots to start up to n workers in.
func (p *Pool) freeSlots(now time.Time, n int) []int {
	busy := map[int]bool{}
	for slot := range p.live {
		busy[slot] = true
	}
	for _, slot := range p.draining {
		busy[slot] = true
	}
	backingOff := map[int]bool{}
	for slot, b := range p.backoff {
		backingOff[slot] = now.Before(b.until)
	}
	return pickSlots(busy, backingOff, n)
}

// pickSlots chooses n slots, lowest first, among those not busy (live or
// draining). A slot that is backing off keeps its place: it counts towards
// the n but gets no start, so a crash loop cannot dodge its backoff by moving
// on to the next slot number.
func pickSlots(busy, backingOff map[int]bool, n int) []int {
	var slots []int
	for slot := 1; n > 0; slot++ {
		if busy[slot] {
			continue
		}
		n--
		if !backingOff[slot] {
			slots = append(slots, slot)
		}
	}
	return slots
}

// drainDownTo stops the workers that did least over the last tick until want
// remain. Their stop jobs are waited for in the background: systemd sends the
// drain signal, waits drain_timeout_sec and SIGKILLs, which can take long.
func (p *Pool) drainDownTo(ctx context.Context, want int) {
	live := make([]*worker, 0, len(p.live))
	for _, w := range p.live {
		live = append(live, w)
	}
	for _, w := range pickVictims(live, len(live)-want) {
		p.stopWorker(ctx, w, "scale-down")
	}
}

// pickVictims chooses the n workers to stop: the least CPU over the last tick
// first (a worker without a full tick of samples counts as idle), then the
// highest slot, so that the pool keeps its low slot numbers.
func pickVictims(ws []*worker, n int) []*worker {
	ws = slices.Clone(ws)
	sort.Slice(ws, func(i, j int) bool {
		a, b := ws[i], ws[j]
		if a.util != b.util {
			return a.util < b.util
		}
		return a.slot > b.slot
	})
	return ws[:max(0, min(n, len(ws)))]
}

// stopWorker asks systemd to stop one worker; it stops counting as current
// at once. Called with p.mu held.
func (p *Pool) stopWorker(ctx context.Context, w *worker, why string) {
	sctx, cancel := context.WithTimeout(ctx, callTimeout)
	done, err := p.units.StopWorker(sctx, w.unit)
	cancel()
	f := p.fields(eventlog.Fields{"FLEXIQ_SLOT": strconv.Itoa(w.slot), "FLEXIQ_UNIT": w.unit})
	if err != nil {
		p.log.Event(eventlog.WorkerStopped, eventlog.Err, f, "pool=%s cannot stop %s (%s): %v", p.name, w.unit, why, err)
		return
	}
	delete(p.live, w.slot)
	p.draining[w.unit] = w.slot
	p.log.Event(eventlog.WorkerStopped, eventlog.Info, f, "pool=%s draining %s (%s)", p.name, w.unit, why)
	// The stop job takes at most drain_timeout_sec plus the SIGKILL; past
	// that and a margin, stop waiting and let the next listing tell.
	limit := p.cfg.DrainTimeout + time.Minute
	p.drains.Add(1)
	go func() {
		defer p.drains.Done()
		result := AwaitStop(ctx, p.units, w.unit, done, limit)
		p.mu.Lock()
		delete(p.draining, w.unit)
		p.mu.Unlock()
		p.log.Event(eventlog.WorkerStopped, eventlog.Info, eventlog.Fields{
			"FLEXIQ_POOL": p.name, "FLEXIQ_SLOT": strconv.Itoa(w.slot), "FLEXIQ_UNIT": w.unit, "FLEXIQ_RESULT": result,
		}, "pool=%s %s stopped (stop job %s)", p.name, w.unit, result)
	}()
}

// AwaitStop waits for a worker's stop job and clears what it leaves: a
// worker SIGKILLed at its drain timeout ends "failed" and would otherwise
// stay loaded. It returns the job's result.
func AwaitStop(ctx context.Context, u *units.Manager, unit string, done <-chan string, limit time.Duration) string {
	var result string
	select {
	case result = <-done:
	case <-time.After(limit):
		return "no result within " + limit.String()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	// An error only means the unit is already gone, as a clean stop leaves it.
	_ = u.ResetFailed(rctx, unit)
	return result
}

// Drain stops every worker of the pool and waits for all stop jobs,
// including those already under way.
func (p *Pool) Drain(ctx context.Context, why string) {
	p.mu.Lock()
	for _, w := range p.live {
		p.stopWorker(ctx, w, why)
	}
	p.target = 0
	p.updateStatus(nil)
	p.mu.Unlock()
	p.drains.Wait()
}

// Update applies a reloaded configuration; bounds take effect at the next
// tick. A changed source is reopened.
func (p *Pool) Update(cfg *config.Pool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !sameSource(p.cfg.Source, cfg.Source) {
		src, err := source.New(cfg.Source)
		if err != nil {
			return fmt.Errorf("pool %s: %w", cfg.Name, err)
		}
		p.src.Close()
		p.src = src
	}
	p.cfg = cfg
	p.summaryMu.Lock()
	p.status.Max, p.poll = cfg.MaxWorkers, cfg.PollInterval
	p.summaryMu.Unlock()
	return nil
}

// Close releases the pool's source.
func (p *Pool) Close() error { return p.src.Close() }

func sameSource(a, b config.Source) bool {
	if a.Type != b.Type || a.Path != b.Path || a.Namespace != b.Namespace || a.Query != b.Query || len(a.Queues) != len(b.Queues) {
		return false
	}
	for i := range a.Queues {
		if a.Queues[i] != b.Queues[i] {
			return false
		}
	}
	return true
}

// sampleCPU updates each live worker's utilisation over the last tick:
// Δusage / Δwall / cpu_per_worker. A worker needs two samples of the same
// invocation, a full tick apart, before it counts.
func (p *Pool) sampleCPU(now time.Time, listed []units.Worker) {
	byUnit := map[string]units.Worker{}
	for _, w := range listed {
		byUnit[w.Unit] = w
	}
	for _, lw := range p.live {
		lw.util, lw.utilKnown = 0, false
		w, ok := byUnit[lw.unit]
		if !ok {
			lw.havePrev = false
			continue
		}
		usage, err := p.units.CPUUsage(w)
		if err != nil {
			lw.havePrev = false
			continue
		}
		if lw.havePrev && lw.invocation == w.InvocationID && now.After(lw.prevAt) {
			lw.util = float64(usage-lw.prevUsage) / float64(now.Sub(lw.prevAt)) / p.cfg.CPUPerWorker
			lw.utilKnown = true
		}
		lw.prevUsage, lw.prevAt, lw.havePrev = usage, now, true
		lw.invocation = w.InvocationID
	}
}

func (p *Pool) meanUtil() (float64, bool) {
	var sum float64
	n := 0
	for _, w := range p.live {
		if w.utilKnown {
			sum += w.util
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// runningOnLive is R as the policy means it: the jobs running on the live
// workers. The queue also counts the jobs that draining workers are
// finishing; counted against the live workers alone, they would look like an
// overload right after every scale-down and undo it at once. A draining
// worker holds at most threads_per_worker of them.
func runningOnLive(running int64, draining, threadsPerWorker int) int64 {
	return max(0, running-int64(draining*threadsPerWorker))
}

// logDecision writes one entry for each tick that changes something: a
// scale, or a change of action (into a hold, back to stable). queueRunning
// is the queue's own running count, draining workers' jobs included.
func (p *Pool) logDecision(d policy.Decision, o policy.Observation, queueRunning int64) {
	changed := d.Action != p.lastAction
	p.lastAction = d.Action
	if d.Action != policy.ScaleUp && d.Action != policy.ScaleDown && !changed {
		return
	}
	if d.Action == policy.Hold {
		return // the source error says why, throttled
	}
	draining := ""
	if len(p.draining) > 0 {
		draining = fmt.Sprintf(" (%d on %d draining workers)", queueRunning-o.Running, len(p.draining))
	}
	p.log.Event(eventlog.Decision, eventlog.Notice, p.fields(eventlog.Fields{
		"FLEXIQ_PENDING":  strconv.FormatInt(o.Pending, 10),
		"FLEXIQ_RUNNING":  strconv.FormatInt(queueRunning, 10),
		"FLEXIQ_CURRENT":  strconv.Itoa(d.Current),
		"FLEXIQ_DESIRED":  strconv.Itoa(d.Desired),
		"FLEXIQ_ACTION":   string(d.Action),
		"FLEXIQ_DRAINING": strconv.Itoa(len(p.draining)),
	}), "pool=%s pending=%d running=%d%s workers=%d -> %d (%s)", p.name, o.Pending, queueRunning, draining, d.Current, d.Desired, d.Rationale)
}

func (p *Pool) fields(extra eventlog.Fields) eventlog.Fields {
	f := eventlog.Fields{"FLEXIQ_POOL": p.name}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

func (p *Pool) updateStatus(c *source.Counts) {
	p.summaryMu.Lock()
	defer p.summaryMu.Unlock()
	p.status.Current = len(p.live)
	p.status.Draining = len(p.draining)
	p.status.Max = p.cfg.MaxWorkers
	if c != nil {
		p.status.Pending, p.status.PendingKnown = c.Pending, true
	}
}

func workerSpec(c *config.Pool, slot int) units.WorkerSpec {
	return units.WorkerSpec{
		Pool:               c.Name,
		Slot:               slot,
		Exec:               c.Exec,
		User:               c.User,
		Group:              c.Group,
		WorkingDirectory:   c.WorkingDirectory,
		Environment:        c.Environment,
		KillSignal:         c.DrainSignalNumber,
		StopTimeout:        c.DrainTimeout,
		CPUQuotaPerSecUSec: c.Limits.CPUQuotaPerSecUSec,
		MemoryMax:          c.Limits.MemoryMaxBytes,
		TasksMax:           c.Limits.TasksMax,
	}
}
