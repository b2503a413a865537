package policy

import (
	"strings"
	"testing"
	"time"
)

// onsetParams is the P4 setting with the burst-onset signal on.
func onsetParams() Params {
	p := p4Params()
	p.OnsetMinJobs = 3
	return p
}

// waiting is an observation with pending jobs, the oldest age old, and no
// demand known (the window has forgotten the last burst).
func waiting(pending, running int64, current int, age time.Duration) Observation {
	o := obs(pending, running, current)
	o.OldestAge, o.OldestKnown = age, true
	return o
}

// The burst-onset signal: jobs seen waiting over the oldest one's age, times
// the remembered service time. Each case first shows the recommender a tick
// where the demand signal knew the service time (prior), then the tick
// judged.
func TestOnsetSignal(t *testing.T) {
	known := demandObs(0, 0, 2, 0.5, 2*time.Second) // W = 2 s remembered
	tests := []struct {
		name   string
		params func(*Params)
		prior  *Observation
		obs    Observation
		want   int // Onset, when used
		used   bool
		desire int
	}{
		{
			// Issue 17's worst case (shift 2 s): 4 jobs 0.4 s old, no
			// service time in the 7 s window. 4 / 0.5 s × 2 s = 16.
			name:  "a burst's first jobs ask for its rate times the remembered W",
			prior: &known, obs: waiting(4, 1, 2, 400*time.Millisecond), want: 16, used: true, desire: 16,
		},
		{
			// Without the signal, depth asks for 4, held by nothing: 4.
			name:   "off: depth alone",
			params: func(p *Params) { p.OnsetMinJobs = 0 },
			prior:  &known, obs: waiting(4, 1, 2, 400*time.Millisecond), desire: 4,
		},
		{
			name:  "two jobs are noise, not a rate",
			prior: &known, obs: waiting(2, 0, 2, 100*time.Millisecond), desire: 2,
		},
		{
			// A warm pool took the burst's first jobs: all 4 threads
			// busy, 1 waiting 0.4 s. 5 jobs / 0.5 s × 2 s = 20.
			name:  "a saturated pool counts its running jobs too",
			prior: &known, obs: waiting(1, 4, 4, 400*time.Millisecond), want: 20, used: true, desire: 20,
		},
		{
			// Not saturated: the running jobs may be old; 1 waiting is
			// below the minimum.
			name:  "a pool with idle threads does not",
			prior: &known, obs: waiting(1, 3, 4, 400*time.Millisecond), desire: 4,
		},
		{
			// 3 jobs 6 s old: 0.5/s × 2 s = 1.
			name:  "a slow trickle asks for little",
			prior: &known, obs: waiting(3, 0, 1, 6*time.Second), want: 1, used: true, desire: 3,
		},
		{
			name: "no service time ever observed: sits out",
			obs:  waiting(4, 1, 2, 400*time.Millisecond), desire: 4,
		},
		{
			name:   "only with the Little's law signal",
			params: func(p *Params) { p.Demand = DemandNone },
			prior:  &known, obs: waiting(4, 1, 2, 400*time.Millisecond), desire: 4,
		},
		{
			// Steady traffic: jobs finish within the demand window, so
			// Little's law already sees the load; 4 jobs 0.4 s old on a
			// Poisson stream are not a burst.
			name:  "the demand window knows the load: sits out",
			prior: &known, obs: func() Observation {
				o := waiting(4, 1, 2, 400*time.Millisecond)
				o.ArrivalRate, o.ServiceTime, o.DemandKnown = 1, 2*time.Second, true
				return o
			}(), desire: 4,
		},
		{
			name:  "oldest age unknown: sits out",
			prior: &known, obs: obs(4, 1, 2), desire: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := onsetParams()
			if tt.params != nil {
				tt.params(&p)
			}
			var r Recommender
			now := time.Unix(1000, 0)
			if tt.prior != nil {
				r.Decide(now, p, *tt.prior)
			}
			d := r.Decide(now.Add(40*time.Second), p, tt.obs)
			if d.OnsetUsed != tt.used || d.Onset != tt.want {
				t.Errorf("Onset, OnsetUsed = %d, %t; want %d, %t (%s)", d.Onset, d.OnsetUsed, tt.want, tt.used, d.Rationale)
			}
			if d.Desired != tt.desire {
				t.Errorf("Desired = %d, want %d (%s)", d.Desired, tt.desire, d.Rationale)
			}
			if tt.used && !strings.Contains(d.Rationale, "onset=") {
				t.Errorf("rationale %q does not name the onset signal", d.Rationale)
			}
		})
	}
}

// The keep-warm floor: for KeepWarm after the last tick that saw work, a
// scale-down stops at KeepWarmWorkers; it never starts a worker.
func TestKeepWarm(t *testing.T) {
	work := demandObs(5, 5, 10, 2, 2*time.Second) // a tick with work
	quiet := func(c int) Observation { return demandObs(0, 0, c, 0, 0) }
	running := func(c int) Observation { return demandObs(0, 1, c, 0, 2*time.Second) }
	tests := []struct {
		name   string
		params func(*Params)
		after  time.Duration
		obs    Observation
		desire int
		used   bool
	}{
		{"within keep_warm_sec: stops at the floor", nil, 30 * time.Second, quiet(10), 3, true},
		{"at keep_warm_sec exactly: still", nil, 35 * time.Second, quiet(10), 3, true},
		{"after keep_warm_sec: down to the signals", nil, 40 * time.Second, quiet(10), 1, false},
		{"a pool below the floor is not raised", nil, 10 * time.Second, quiet(2), 2, true},
		{"a running job is not work: after keep_warm_sec it goes", nil, 40 * time.Second, running(10), 1, false},
		{"off", func(p *Params) { p.KeepWarmWorkers = 0 }, 10 * time.Second, quiet(10), 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := p4Params()
			p.KeepWarmWorkers, p.KeepWarm = 3, 35*time.Second
			if tt.params != nil {
				tt.params(&p)
			}
			var r Recommender
			now := time.Unix(1000, 0)
			r.Decide(now, p, work)
			d := r.Decide(now.Add(tt.after), p, tt.obs)
			if d.Desired != tt.desire || d.KeepWarmUsed != tt.used {
				t.Errorf("Desired, KeepWarmUsed = %d, %t; want %d, %t (%s)", d.Desired, d.KeepWarmUsed, tt.desire, tt.used, d.Rationale)
			}
		})
	}
}
