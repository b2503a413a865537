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
//
// The model is in two files: model.go holds its settings, its results and
// the event loop; pool.go holds the pool's workers, the dispatch of jobs to
// their threads and the controller's tick. trace.go reads and writes
// traces and generate.go makes synthetic ones; a run is drawn elsewhere,
// by the flexiq-scaled-plot helper (internal/history/picture's run.go), so
// that the daemon's binary does not carry the plotting library.
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

	cost float64 // worker-seconds of stopped workers
	peak int
	// pipe is the daemon's decision pipeline, HPA strategy; the model has
	// no behaviour, so its limiter limits nothing.
	pipe  *policy.Pipeline
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
	m.pipe = policy.NewPipeline(policy.StrategyHPA, policy.Behavior{}, nil)
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
		tc, ta, tr := m.nextEvents(now)
		switch t := min(tc, ta, tr, nextTick, m.wakeDue); {
		case tc == t:
			now = t
			m.complete(now)
			lastDone = now
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
	return m.finish(now)
}

// nextEvents are the instants of the next completion, the next job to become
// visible and the next worker to become ready (+Inf: none).
func (m *model) nextEvents(now float64) (tc, ta, tr float64) {
	tc, ta, tr = math.Inf(1), math.Inf(1), math.Inf(1)
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
	return tc, ta, tr
}

// complete ends the first job to complete, at now: its thread is free, and
// a draining worker with nothing left to do stops.
func (m *model) complete(now float64) {
	c := heap.Pop(&m.done).(completion)
	c.w.account(now)
	c.w.busy--
	m.running--
	m.doneAt = append(m.doneAt, now)
	m.doneSvc = append(m.doneSvc, c.svc)
	if c.w.draining && c.w.busy == 0 {
		m.stopWorker(c.w, now)
	}
	m.wake(now)
}

// finish sums the run up when it ends, at end: the workers still alive cost
// until then.
func (m *model) finish(end float64) Result {
	t0 := m.origin
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
