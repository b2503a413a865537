// Package workload is a discrete-event model of a job queue and the pool of
// workers that serves it, driven by the daemon's own decision pipeline
// (policy.Pipeline, HPA strategy) and victim order (policy.VictimBefore), so that
// a pool's knobs can be judged offline against a trace of real jobs: what
// they cost in worker-seconds and what they cost the jobs in waiting.
//
// The model:
//   - jobs are served first in, first out, each on one thread;
//   - a worker has ThreadsPerWorker threads and takes jobs only Startup
//     after it was started;
//   - the controller ticks every Poll, observing pending and running jobs
//     as the daemon's source would, and starts or drains workers at once;
//   - victims are the daemon's, idle first;
//   - a draining worker takes no new job, finishes its current ones and
//     then stops;
//   - a worker costs from its start to its stop, draining included.
//
// Time is continuous: every arrival, start and completion happens at its
// exact instant (unless Step quantises it, which exists only to show what a
// time-stepped model does to the waits; see docs/simulate.md).
package workload

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// Job is one job of a trace, in seconds from the trace's start.
type Job struct {
	Arrival float64
	Service float64
}

// Config is one run's settings.
type Config struct {
	Params  policy.Params // ThreadsPerWorker is the model's threads too
	Poll    time.Duration // the controller's tick
	Startup time.Duration // from a worker's start to its first job
	// Initial workers at the trace's start, ready at once; negative means
	// Params.MinWorkers.
	Initial int
	// WakeGap, when > 0, models the daemon's wake-up (a source that
	// watches the queue, as flexiq-sqlite does with inotify): every
	// arrival, claim and completion wakes the controller, which ticks at
	// once after a quiet spell and otherwise WakeGap after its last
	// wake-up tick; every tick restarts the poll interval. 0 polls only,
	// as the model does.
	WakeGap time.Duration
	// UntilMin runs on after the last job, until the pool is back at
	// min_workers with nothing draining (at most an hour more), and counts
	// its cost until then: as a real pool is measured, which does not stop
	// when its queue empties.
	UntilMin bool
	// Step, when > 0, makes every job visible and every thread free only at
	// the next multiple of Step, as a time-stepped model does. 0 is exact.
	Step time.Duration
	// Shift delays every arrival by Shift against the controller's ticks
	// and the pool's start, which stay anchored at the trace's first
	// arrival. A figure that moves with the shift depends on the phase of
	// the arrivals against the ticks, which no real queue controls.
	Shift time.Duration
}

// Tick is the state of the model at one controller tick and its decision.
type Tick struct {
	T           float64       `json:"t"`
	Pending     int           `json:"pending"`
	Running     int           `json:"running"`
	Current     int           `json:"current"`
	Draining    int           `json:"draining"`
	Desired     int           `json:"desired"`
	Action      policy.Action `json:"action"`
	ArrivalRate float64       `json:"arrival_rate"`
	ServiceTime float64       `json:"service_time"`
	Rationale   string        `json:"rationale"`
}

// Result is a run's summary.
type Result struct {
	Jobs int
	// End is when the last job finished: every worker's cost stops there.
	End float64
	// WorkerSeconds is what the pool cost; Floor is the total service
	// time, what a pool of exactly the busy threads would cost with one
	// thread per worker.
	WorkerSeconds, Floor float64
	// Wait percentiles (nearest rank), seconds from arrival to start.
	WaitP50, WaitP95, WaitP99, WaitMax float64
	// Actions counts ticks whose target differs from the current count.
	Actions int
	// Peak is the most workers alive at once, draining ones included.
	Peak int
}

// Validate checks what Run needs, naming the setting that is wrong.
func (c Config) Validate() error {
	switch {
	case c.Poll <= 0:
		return errors.New("poll interval must be > 0")
	case c.Startup < 0:
		return errors.New("startup must be >= 0")
	case c.Step < 0:
		return errors.New("step must be >= 0")
	case c.WakeGap < 0:
		return errors.New("wake gap must be >= 0")
	case c.Shift < 0:
		return errors.New("shift must be >= 0")
	case c.Params.ThreadsPerWorker < 1:
		return errors.New("threads_per_worker must be >= 1")
	case c.Params.MaxWorkers < 1:
		return errors.New("max_workers must be >= 1")
	}
	return nil
}

type worker struct {
	slot     int
	start    float64
	ready    float64
	draining bool
	busy     int
	// busyArea is thread-seconds of work since the last tick, at lastT.
	busyArea float64
	lastT    float64
	// util is the utilisation over the last tick, as the victim order
	// sees it; fresh is true until the worker has lived a whole tick.
	util  float64
	fresh bool
}

func (w *worker) account(t float64) {
	w.busyArea += float64(w.busy) * (t - w.lastT)
	w.lastT = t
}

type completion struct {
	at  float64
	w   *worker
	svc float64
	seq int
}

type completions []completion

func (h completions) Len() int { return len(h) }
func (h completions) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h completions) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *completions) Push(x any)   { *h = append(*h, x.(completion)) }
func (h *completions) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// epoch anchors model time for the policy, which only compares instants.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Run plays jobs (sorted by arrival) through the pool and calls onTick, if
// not nil, at every tick. The run ends when the last job has finished.
func Run(jobs []Job, cfg Config, onTick func(Tick)) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	for i, j := range jobs {
		switch {
		case j.Service < 0 || math.IsNaN(j.Service) || math.IsInf(j.Service, 0):
			return Result{}, fmt.Errorf("job %d: service time %g must be a number >= 0", i+1, j.Service)
		case i > 0 && j.Arrival < jobs[i-1].Arrival:
			return Result{}, fmt.Errorf("job %d: arrival %g is before the previous job's %g", i+1, j.Arrival, jobs[i-1].Arrival)
		}
	}
	m := newModel(jobs, cfg)
	return m.run(onTick), nil
}

type model struct {
	cfg     Config
	p       policy.Params
	threads int
	poll    float64
	startup float64
	step    float64

	origin  float64   // the ticks' anchor: the first arrival, before Shift
	jobs    []Job     // arrivals shifted by Shift
	visible []float64 // when each job can be taken (its arrival, or stepped)
	next    int       // next job to arrive
	queue   []int     // arrived, not started, FIFO
	qhead   int
	waits   []float64

	workers []*worker // live and draining, by slot
	done    completions
	seq     int
	running int

	// completed jobs, in completion order, for the demand window.
	doneAt, doneSvc []float64

	// wake-up: the last wake-up tick, and the pending one (+Inf: none).
	wakeGap, wakeLast, wakeDue float64
	lastTick                   float64

	cost  float64 // worker-seconds of stopped workers
	peak  int
	rec   policy.Recommender
	lim   policy.Limiter  // the pipeline's; the model has no behaviour, so it limits nothing
	pipe  policy.Pipeline // the daemon's decision pipeline, HPA strategy
	res   Result
	floor float64
}

func newModel(jobs []Job, cfg Config) *model {
	m := &model{
		cfg: cfg, p: cfg.Params, threads: cfg.Params.ThreadsPerWorker,
		poll: cfg.Poll.Seconds(), startup: cfg.Startup.Seconds(), step: cfg.Step.Seconds(),
		wakeGap: cfg.WakeGap.Seconds(), wakeLast: math.Inf(-1), wakeDue: math.Inf(1),
		jobs: jobs, visible: make([]float64, len(jobs)), waits: make([]float64, 0, len(jobs)),
	}
	m.pipe = policy.Pipeline{Strategy: policy.StrategyHPA, Rec: &m.rec, Limiter: &m.lim}
	if m.p.PollInterval <= 0 {
		// The policy's tick is the model's.
		m.p.PollInterval = cfg.Poll
	}
	if len(jobs) > 0 {
		m.origin = jobs[0].Arrival
	}
	if shift := cfg.Shift.Seconds(); shift > 0 {
		m.jobs = slices.Clone(jobs)
		for i := range m.jobs {
			m.jobs[i].Arrival += shift
		}
	}
	for i, j := range m.jobs {
		m.visible[i] = m.stepped(j.Arrival)
		m.floor += j.Service
	}
	return m
}

// stepped rounds t up to the time step, if there is one.
func (m *model) stepped(t float64) float64 {
	if m.step <= 0 {
		return t
	}
	return math.Ceil(t/m.step-1e-9) * m.step
}

func (m *model) run(onTick func(Tick)) Result {
	initial := m.cfg.Initial
	if initial < 0 {
		initial = m.p.MinWorkers
	}
	t0 := m.origin
	for range initial {
		w := m.startWorker(t0)
		w.ready = t0
	}
	now := t0
	nextTick := t0
	var lastDone float64
	for m.next < len(m.jobs) || m.running > 0 || m.qhead < len(m.queue) || m.settling(now, lastDone) {
		// The next event; at equal times completions free threads before
		// arrivals take them, and the tick sees both.
		tc, ta, tr := math.Inf(1), math.Inf(1), math.Inf(1)
		if len(m.done) > 0 {
			tc = m.done[0].at
		}
		if m.next < len(m.jobs) {
			ta = m.visible[m.next]
		}
		for _, w := range m.workers {
			if !w.draining && w.ready > now && w.ready < tr {
				tr = w.ready
			}
		}
		switch t := min(tc, ta, tr, nextTick, m.wakeDue); {
		case tc == t:
			now = t
			c := heap.Pop(&m.done).(completion)
			c.w.account(now)
			c.w.busy--
			m.running--
			lastDone = now
			m.doneAt = append(m.doneAt, now)
			m.doneSvc = append(m.doneSvc, c.svc)
			if c.w.draining && c.w.busy == 0 {
				m.stopWorker(c.w, now)
			}
			m.wake(now)
		case tr == t:
			now = t // dispatch below puts the worker to work
		case ta == t:
			now = t
			m.queue = append(m.queue, m.next)
			m.next++
			m.wake(now)
		default:
			now = t
			if t == m.wakeDue {
				m.wakeLast, m.wakeDue = t, math.Inf(1)
			}
			m.tick(now, onTick)
			if m.wakeGap > 0 {
				// Every tick restarts the poll timer, as in Pool.Run.
				nextTick = now + m.poll
			} else {
				nextTick = nextTickAfter(t0, now, m.poll)
			}
		}
		m.dispatch(now)
	}
	end := now
	for _, w := range m.workers {
		m.cost += end - w.start
	}
	m.res.End = end - t0
	m.res.WorkerSeconds = m.cost
	m.res.Floor = m.floor
	m.res.Jobs = len(m.jobs)
	m.res.Peak = m.peak
	m.res.WaitP50, m.res.WaitP95, m.res.WaitP99 = percentiles(m.waits)
	if len(m.waits) > 0 {
		m.res.WaitMax = slices.Max(m.waits)
	}
	return m.res
}

// settling says whether a run with UntilMin goes on after its last job: the
// pool is not yet back at min_workers, or still draining, and the hour
// that bounds it is not over.
func (m *model) settling(now, lastDone float64) bool {
	if !m.cfg.UntilMin || now > lastDone+3600 {
		return false
	}
	live := 0
	for _, w := range m.workers {
		if w.draining {
			return true
		}
		live++
	}
	return live != m.p.MinWorkers
}

// wake notes a write to the queue at now (an arrival, a claim, a
// completion): with wake-up on, a tick is due at once after a quiet spell,
// else WakeGap after the last wake-up tick; a pending one covers it.
func (m *model) wake(now float64) {
	if m.wakeGap <= 0 || !math.IsInf(m.wakeDue, 1) {
		return
	}
	m.wakeDue = max(now, m.wakeLast+m.wakeGap)
}

// nextTickAfter is the first tick instant after now, on the grid t0 + k·poll.
// Computing it from k, not by adding poll up, keeps the grid exact.
func nextTickAfter(t0, now, poll float64) float64 {
	k := math.Floor((now-t0)/poll+1e-9) + 1
	return t0 + k*poll
}

// dispatch gives queued jobs to free threads: the ready worker of the
// lowest slot first, which leaves the high slots idle for the victim order
// to find, as a queue polled by workers that sleep when idle roughly does.
func (m *model) dispatch(now float64) {
	claimed := false
	defer func() {
		if claimed {
			m.wake(now)
		}
	}()
	for m.qhead < len(m.queue) {
		var w *worker
		for _, c := range m.workers {
			if !c.draining && c.ready <= now && c.busy < m.threads {
				w = c
				break
			}
		}
		if w == nil {
			return
		}
		j := m.queue[m.qhead]
		m.qhead++
		claimed = true
		job := m.jobs[j]
		m.waits = append(m.waits, now-job.Arrival)
		w.account(now)
		w.busy++
		m.running++
		m.seq++
		heap.Push(&m.done, completion{at: m.stepped(now + job.Service), w: w, svc: job.Service, seq: m.seq})
	}
}

func (m *model) tick(now float64, onTick func(Tick)) {
	live, draining := 0, 0
	for _, w := range m.workers {
		// The utilisation over the tick that ends now. A worker without a
		// full tick of samples counts as idle, as in the controller.
		w.account(now)
		w.util = 0
		if !w.fresh && now > m.lastTick {
			w.util = w.busyArea / float64(m.threads) / (now - m.lastTick)
		}
		w.busyArea, w.fresh = 0, false
		if w.draining {
			draining++
		} else {
			live++
		}
	}
	m.lastTick = now
	pending := len(m.queue) - m.qhead
	o := policy.Observation{
		Valid:   true,
		Current: live,
		Pending: int64(pending),
		// As the controller does (runningOnLive): the jobs that draining
		// workers finish are not held against the live ones.
		Running: max(0, int64(m.running)-int64(draining*m.threads)),
	}
	// The oldest ready job's age from its arrival, as a source reads it
	// from created_at.
	if pending > 0 {
		o.OldestAge = time.Duration((now - m.jobs[m.queue[m.qhead]].Arrival) * float64(time.Second))
		o.OldestKnown = true
	}
	rate, svc, known := m.demand(now)
	if m.p.Demand != policy.DemandNone {
		o.ArrivalRate, o.ServiceTime, o.DemandKnown = rate, time.Duration(svc*float64(time.Second)), known
	}
	at := epoch.Add(time.Duration(math.Round((now - m.t0()) * float64(time.Second))))
	d := m.pipe.Decide(policy.Input{Now: at, Params: m.p, Obs: o}).Decision
	m.pipe.Acted(at, d)
	if d.Desired != live {
		m.res.Actions++
	}
	switch {
	case d.Desired > live:
		for range d.Desired - live {
			m.startWorker(now)
		}
	case d.Desired < live:
		m.drain(now, live-d.Desired)
	}
	if onTick != nil {
		onTick(Tick{
			T: now - m.t0(), Pending: pending, Running: m.running, Current: live, Draining: draining,
			Desired: d.Desired, Action: d.Action, ArrivalRate: rate, ServiceTime: svc, Rationale: d.Rationale,
		})
	}
}

func (m *model) t0() float64 { return m.origin }

// demand is the arrival rate and the mean service time of the jobs finished
// over the demand window ending at now, as a source reads them from the
// queue's created_at, started_at and completed_at. known is false before
// any job has finished in the window.
func (m *model) demand(now float64) (rate, svc float64, known bool) {
	win := m.p.DemandWindow.Seconds()
	if win <= 0 {
		win = policy.DefaultDemandWindow.Seconds()
	}
	from := now - win
	// Arrivals in (from, now]: jobs are sorted by arrival.
	lo, _ := slices.BinarySearchFunc(m.jobs[:m.next], from, func(j Job, t float64) int {
		switch {
		case j.Arrival <= t:
			return -1
		}
		return 1
	})
	rate = float64(m.next-lo) / win
	i, _ := slices.BinarySearchFunc(m.doneAt, from, func(at, t float64) int {
		if at <= t {
			return -1
		}
		return 1
	})
	n := len(m.doneAt) - i
	if n == 0 {
		return rate, 0, false
	}
	var sum float64
	for _, s := range m.doneSvc[i:] {
		sum += s
	}
	return rate, sum / float64(n), true
}

// startWorker starts a worker in the lowest free slot.
func (m *model) startWorker(now float64) *worker {
	slot := 0
	for _, w := range m.workers { // sorted by slot
		if w.slot != slot {
			break
		}
		slot++
	}
	w := &worker{slot: slot, start: now, ready: now + m.startup, lastT: now, fresh: true}
	i, _ := slices.BinarySearchFunc(m.workers, slot, func(w *worker, s int) int { return w.slot - s })
	m.workers = slices.Insert(m.workers, i, w)
	m.peak = max(m.peak, len(m.workers))
	return w
}

// drain stops n live workers in the daemon's victim order.
func (m *model) drain(now float64, n int) {
	var live []*worker
	for _, w := range m.workers {
		if !w.draining {
			live = append(live, w)
		}
	}
	slices.SortStableFunc(live, func(a, b *worker) int {
		va, vb := policy.Victim{Slot: a.slot, Util: a.util}, policy.Victim{Slot: b.slot, Util: b.util}
		switch {
		case policy.VictimBefore(va, vb):
			return -1
		case policy.VictimBefore(vb, va):
			return 1
		}
		return 0
	})
	for _, w := range live[:min(n, len(live))] {
		w.draining = true
		if w.busy == 0 {
			m.stopWorker(w, now)
		}
	}
}

func (m *model) stopWorker(w *worker, now float64) {
	m.cost += now - w.start
	m.workers = slices.DeleteFunc(m.workers, func(c *worker) bool { return c == w })
}

// percentiles are the nearest-rank p50, p95 and p99 of xs.
func percentiles(xs []float64) (p50, p95, p99 float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return rank(0.50), rank(0.95), rank(0.99)
}
