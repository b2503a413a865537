package workload

// The pool's side of the model: its workers and their threads, the order in
// which jobs complete, the dispatch of queued jobs, and the controller's
// tick (observation, demand, decision, starts and drains in the daemon's
// victim order). model.go holds the settings, the results and the event
// loop that drives them.

import (
	"container/heap"
	"math"
	"slices"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

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
	d := m.pipe.Decide(policy.NewInput(at, m.p, o, 0, 0, policy.HostState{}, nil)).Decision
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
