package workload

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// fixedParams is a pool of exactly n workers: min = max = n, no windows.
func fixedParams(n, threads int) policy.Params {
	return policy.Params{
		MinWorkers: n, MaxWorkers: n, TargetQueueDepthPerWorker: 1, TargetUtilisation: 1,
		ThreadsPerWorker: threads,
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// Small cases worked out by hand: what each job waits, what the pool costs.
func TestModelByHand(t *testing.T) {
	sec := time.Second
	tests := []struct {
		name    string
		jobs    []Job
		cfg     Config
		ws      float64 // worker-seconds
		waits   [3]float64
		actions int
		peak    int
	}{
		{
			// One worker, one 3 s job at t=0: no wait, the worker costs
			// until the job ends, when the run ends.
			name: "one worker, one job",
			jobs: []Job{{0, 3}},
			cfg:  Config{Params: fixedParams(1, 1), Poll: 5 * sec, Initial: -1},
			ws:   3, waits: [3]float64{0, 0, 0}, peak: 1,
		},
		{
			// FIFO on one thread: the second job waits for the first.
			name: "first in, first out",
			jobs: []Job{{0, 2}, {1, 2}},
			cfg:  Config{Params: fixedParams(1, 1), Poll: 5 * sec, Initial: -1},
			ws:   4, waits: [3]float64{0, 1, 1}, peak: 1,
		},
		{
			// Two threads on one worker run both at once.
			name: "threads",
			jobs: []Job{{0, 2}, {0, 2}, {0, 2}},
			cfg:  Config{Params: fixedParams(1, 2), Poll: 5 * sec, Initial: -1},
			ws:   4, waits: [3]float64{0, 2, 2}, peak: 1,
		},
		{
			// No worker at the start: the tick at 0 starts one, which takes
			// the job 2 s later (startup) and runs it for 1 s.
			name: "startup delay",
			jobs: []Job{{0, 1}},
			cfg: Config{Params: policy.Params{MinWorkers: 0, MaxWorkers: 1, TargetQueueDepthPerWorker: 1,
				TargetUtilisation: 1, ThreadsPerWorker: 1}, Poll: 5 * sec, Startup: 2 * sec, Initial: -1},
			ws: 3, waits: [3]float64{2, 2, 2}, actions: 1, peak: 1,
		},
		{
			// Two workers, both busy at the tick at 0. Slot 0's job ends
			// at 1; at the tick at 5 one job runs, on slot 1 (till 9), so
			// the pool goes to 1 and drains the idle worker, slot 0 (its
			// utilisation over the tick was 0.2, slot 1's 1), although
			// it has the lower slot: 5 + 9 worker-seconds. Draining the
			// highest slot would have cost 9 + 9.
			name: "idle first",
			jobs: []Job{{0, 1}, {0, 9}},
			cfg: Config{Params: policy.Params{MinWorkers: 1, MaxWorkers: 2, TargetQueueDepthPerWorker: 1,
				TargetUtilisation: 1, ThreadsPerWorker: 1}, Poll: 5 * sec, Initial: 2},
			ws: 14, waits: [3]float64{0, 0, 0}, actions: 1, peak: 2,
		},
		{
			// Two busy workers in a pool of max 1: the tick at 0 drains
			// one (neither has a tick of samples, so the highest slot,
			// running the 3 s job). It finishes that job and stops at 3;
			// the job is not cut short. 3 + 8 worker-seconds.
			name: "draining finishes its job",
			jobs: []Job{{0, 8}, {0, 3}},
			cfg:  Config{Params: fixedParams(1, 1), Poll: 5 * sec, Initial: 2},
			ws:   11, waits: [3]float64{0, 0, 0}, actions: 1, peak: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Run(tt.jobs, tt.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			var floor float64
			for _, j := range tt.jobs {
				floor += j.Service
			}
			got := [3]float64{r.WaitP50, r.WaitP95, r.WaitP99}
			if !near(r.WorkerSeconds, tt.ws) || !near(r.Floor, floor) || got != tt.waits || r.Actions != tt.actions || r.Peak != tt.peak {
				t.Errorf("ws %g floor %g waits %v actions %d peak %d; want ws %g floor %g waits %v actions %d peak %d",
					r.WorkerSeconds, r.Floor, got, r.Actions, r.Peak, tt.ws, floor, tt.waits, tt.actions, tt.peak)
			}
		})
	}
}

// With UntilMin the run goes on until the pool is back at min_workers, and
// costs until then: one worker started at the tick at 0 for a job at 0,
// held by a 12 s down window after its job ends at 1; the tick at 15 is the
// first whose window (ticks 5 and 10 asked for 0) lets it go.
func TestModelUntilMin(t *testing.T) {
	p := policy.Params{MinWorkers: 0, MaxWorkers: 2, TargetQueueDepthPerWorker: 1, TargetUtilisation: 1,
		ThreadsPerWorker: 1, ScaleDownWindow: 12 * time.Second}
	jobs := []Job{{0, 1}}
	cfg := Config{Params: p, Poll: 5 * time.Second, Initial: -1}
	r, _ := Run(jobs, cfg, nil)
	cfg.UntilMin = true
	until, _ := Run(jobs, cfg, nil)
	// The job waits out the startup of 0 s: started at 0, done at 1.
	if !near(r.WorkerSeconds, 1) || !near(until.WorkerSeconds, 15) || !near(until.End, 15) {
		t.Errorf("worker-seconds %g and %g (until min, ending at %g), want 1 and 15 ending at 15", r.WorkerSeconds, until.WorkerSeconds, until.End)
	}
}

// With wake-up the pool ticks on queue writes, not only every poll: a pool
// of min 0 lets its worker go when its job ends at 1 (a completion is a
// write), and starts another for the job at 2; polling every 5 s, the first
// worker is still there at 2 and serves it. 1 + 1 worker-seconds against 3.
func TestModelWake(t *testing.T) {
	p := policy.Params{MinWorkers: 0, MaxWorkers: 1, TargetQueueDepthPerWorker: 1, TargetUtilisation: 1, ThreadsPerWorker: 1}
	jobs := []Job{{0, 1}, {2, 1}}
	cfg := Config{Params: p, Poll: 5 * time.Second, Initial: -1}
	var polls int
	r, _ := Run(jobs, cfg, func(Tick) { polls++ })
	cfg.WakeGap = 250 * time.Millisecond
	var wakes []float64
	w, _ := Run(jobs, cfg, func(t Tick) { wakes = append(wakes, t.T) })
	if !near(r.WorkerSeconds, 3) || !near(w.WorkerSeconds, 2) {
		t.Errorf("worker-seconds %g polling, %g with wake-up; want 3 and 2", r.WorkerSeconds, w.WorkerSeconds)
	}
	// Ticks: 0 (arrival), 0.25 (the claim, a gap later), 1 (completion), 2
	// (arrival), 2.25 (claim); the run ends with the last job, at 3.
	if want := []float64{0, 0.25, 1, 2, 2.25}; len(wakes) != len(want) {
		t.Errorf("ticks at %v, want %v", wakes, want)
	} else {
		for i := range want {
			if !near(wakes[i], want[i]) {
				t.Errorf("ticks at %v, want %v", wakes, want)
				break
			}
		}
	}
}

func TestModelStep(t *testing.T) {
	// With a 1 s step, a job arriving at 0.2 is seen at 1, and the second
	// job, freed at 1+0.5 = 1.5, starts at 2: waits 0.8 and 1.8.
	jobs := []Job{{0.2, 0.5}, {0.3, 0.5}}
	r, err := Run(jobs, Config{Params: fixedParams(1, 1), Poll: 5 * time.Second, Initial: -1, Step: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !near(r.WaitP50, 0.8) || !near(r.WaitP99, 1.7) {
		t.Errorf("waits p50 %g p99 %g, want 0.8 and 1.7", r.WaitP50, r.WaitP99)
	}
}

// Shift moves the arrivals against the ticks, which stay where they were: a
// pool of min 0 sees a job at 0 at the tick at 0 and has a worker ready 2 s
// later; the same job shifted by 1 s arrives after that tick and waits for
// the next, at 5, plus the startup: 6 s. The idle second before the job
// costs nothing (no worker), and the job's 1 s of work is the same.
func TestModelShift(t *testing.T) {
	p := policy.Params{MinWorkers: 0, MaxWorkers: 1, TargetQueueDepthPerWorker: 1, TargetUtilisation: 1, ThreadsPerWorker: 1}
	jobs := []Job{{0, 1}}
	for _, tt := range []struct {
		shift     time.Duration
		wait, end float64
	}{
		{0, 2, 3},
		{time.Second, 6, 8},
		{4500 * time.Millisecond, 2.5, 8},
	} {
		r, err := Run(jobs, Config{Params: p, Poll: 5 * time.Second, Startup: 2 * time.Second, Initial: -1, Shift: tt.shift}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !near(r.WaitP50, tt.wait) || !near(r.End, tt.end) || !near(r.WorkerSeconds, 3) {
			t.Errorf("shift %s: wait %g, end %g, worker-seconds %g; want %g, %g, 3", tt.shift, r.WaitP50, r.End, r.WorkerSeconds, tt.wait, tt.end)
		}
	}
	if jobs[0].Arrival != 0 {
		t.Errorf("Run shifted the caller's jobs: arrival %g", jobs[0].Arrival)
	}
}

func TestRunRejects(t *testing.T) {
	p := fixedParams(1, 1)
	tests := []struct {
		name string
		jobs []Job
		cfg  Config
		msg  string
	}{
		{"no poll", nil, Config{Params: p}, "poll interval"},
		{"unsorted", []Job{{2, 1}, {1, 1}}, Config{Params: p, Poll: time.Second}, "job 2: arrival 1 is before"},
		{"negative service", []Job{{0, -1}}, Config{Params: p, Poll: time.Second}, "job 1: service time"},
		{"negative shift", nil, Config{Params: p, Poll: time.Second, Shift: -time.Second}, "shift"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(tt.jobs, tt.cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want %q", err, tt.msg)
			}
		})
	}
}
