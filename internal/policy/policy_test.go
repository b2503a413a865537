package policy

import (
	"math/rand"
	"strings"
	"testing"
	"time"
)

var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// flexiqParams are the knobs of flexiq's own autoscaler tests
// (tests/test_autoscale_compute.py), with both windows off so that a single
// tick shows the raw formula.
func flexiqParams() Params {
	return Params{
		MinWorkers:                1,
		MaxWorkers:                10,
		TargetQueueDepthPerWorker: 10,
		TargetUtilisation:         0.75,
		ThreadsPerWorker:          4,
		Tolerance:                 0.1,
	}
}

func obs(pending, running int64, current int) Observation {
	return Observation{Valid: true, Pending: pending, Running: running, Current: current}
}

func TestDecideSingleTick(t *testing.T) {
	tests := []struct {
		name      string
		params    func(*Params)
		obs       Observation
		want      int
		action    Action
		rationale string // prefix
	}{
		{
			// 2 workers x 4 threads at 75% is 6 running.
			name:      "stable at target utilisation",
			obs:       obs(0, 6, 2),
			want:      2,
			action:    Stable,
			rationale: "stable: depth=0 busy=2 cpu=- latency=- overload=false",
		},
		{
			name:      "scale-up on depth",
			params:    func(p *Params) { p.MaxWorkers = 20 },
			obs:       obs(100, 0, 2),
			want:      10,
			action:    ScaleUp,
			rationale: "scale-up: depth=10 busy=0 cpu=- latency=- overload=false",
		},
		{
			name:      "scale-down at zero load",
			obs:       obs(0, 0, 8),
			want:      1,
			action:    ScaleDown,
			rationale: "scale-down: depth=0 busy=0 cpu=- latency=- overload=false",
		},
		{
			// depth=ceil(1.1)=2, busy=ceil(1.25/0.75)=2: the wide band has
			// nothing to suppress here, which is flexiq's published case.
			name:   "tolerance band, flexiq case",
			params: func(p *Params) { p.Tolerance = 0.5 },
			obs:    obs(11, 5, 2),
			want:   2,
			action: Stable,
		},
		{
			// raw=ceil(25/10)=3 against C=4: |3-4|/4 = 0.25 < 0.3.
			name:      "tolerance band suppresses a small scale-down",
			params:    func(p *Params) { p.Tolerance = 0.3 },
			obs:       obs(25, 0, 4),
			want:      4,
			action:    Stable,
			rationale: "stable: depth=3 busy=0 cpu=- latency=- overload=false (within tolerance)",
		},
		{
			// Same numbers, band just too narrow: 0.25 is not < 0.25.
			name:   "tolerance band edge is exclusive",
			params: func(p *Params) { p.Tolerance = 0.25 },
			obs:    obs(25, 0, 4),
			want:   3,
			action: ScaleDown,
		},
		{
			// 2 workers x 4 threads = 8 < 10 running; busy=ceil(2.5/0.75)=4.
			name:      "overload bypasses tolerance",
			params:    func(p *Params) { p.Tolerance = 0.9 },
			obs:       obs(0, 10, 2),
			want:      4,
			action:    ScaleUp,
			rationale: "scale-up: depth=0 busy=4 cpu=- latency=- overload=true",
		},
		{
			// busy=ceil(9/4/0.9)=3 = C, yet 9 > 8 threads forces C+1.
			name:      "overload forces one more worker",
			params:    func(p *Params) { p.TargetUtilisation = 0.9 },
			obs:       obs(0, 9, 2),
			want:      3,
			action:    ScaleUp,
			rationale: "scale-up: depth=0 busy=3 cpu=- latency=- overload=true",
		},
		{
			name:   "min floor",
			params: func(p *Params) { p.MinWorkers = 3 },
			obs:    obs(0, 0, 2),
			want:   3,
			action: ScaleUp,
		},
		{
			name:   "max ceiling",
			params: func(p *Params) { p.MaxWorkers = 4 },
			obs:    obs(10_000, 0, 2),
			want:   4,
			action: ScaleUp,
		},
		{
			name:   "overload at max stays at max",
			params: func(p *Params) { p.MaxWorkers = 2 },
			obs:    obs(0, 100, 2),
			want:   2,
			action: Stable,
		},
		{
			// Running tasks without workers (left over from a previous
			// daemon) must not count: busy is 0 and there is no overload.
			name:      "cold start from zero",
			params:    func(p *Params) { p.MinWorkers = 0 },
			obs:       obs(50, 7, 0),
			want:      5,
			action:    ScaleUp,
			rationale: "scale-up: depth=5 busy=0 cpu=- latency=- overload=false",
		},
		{
			name:   "idle pool with min 0 stays at zero",
			params: func(p *Params) { p.MinWorkers = 0 },
			obs:    obs(0, 0, 0),
			want:   0,
			action: Stable,
		},
		{
			// The HPA documentation example: 2 replicas at 100% of a 50%
			// target want 4.
			name: "HPA formula",
			params: func(p *Params) {
				p.TargetUtilisation = 0.5
				p.ThreadsPerWorker = 2
				p.TargetQueueDepthPerWorker = 1000
			},
			obs:    obs(0, 4, 2),
			want:   4,
			action: ScaleUp,
		},
		{
			// 3 workers at 10% CPU against a 10% target is 3.0000000000000004
			// in floats; the epsilon keeps it from asking for a fourth.
			name:   "ceil epsilon",
			params: func(p *Params) { p.TargetCPUUtilisation = 0.1 },
			obs:    Observation{Valid: true, Current: 3, CPU: 0.1, CPUKnown: true},
			want:   3,
			action: Stable,
		},
		{
			// 3 workers at 90% CPU against an 80% target: ceil(3.375)=4.
			name:      "cpu signal",
			params:    func(p *Params) { p.TargetCPUUtilisation = 0.8 },
			obs:       Observation{Valid: true, Current: 3, CPU: 0.9, CPUKnown: true},
			want:      4,
			action:    ScaleUp,
			rationale: "scale-up: depth=0 busy=0 cpu=4 latency=- overload=false",
		},
		{
			name:      "cpu signal unknown",
			params:    func(p *Params) { p.TargetCPUUtilisation = 0.8 },
			obs:       Observation{Valid: true, Current: 3, CPU: 0.9},
			want:      1,
			action:    ScaleDown,
			rationale: "scale-down: depth=0 busy=0 cpu=- latency=- overload=false",
		},
		{
			name:   "cpu signal off",
			obs:    Observation{Valid: true, Current: 3, CPU: 0.9, CPUKnown: true},
			want:   1,
			action: ScaleDown,
		},
		{
			name:      "hold on source failure",
			obs:       Observation{Valid: false, Current: 8},
			want:      8,
			action:    Hold,
			rationale: "hold: source unavailable",
		},
		{
			name:      "hold on negative count",
			obs:       obs(-1, 0, 8),
			want:      8,
			action:    Hold,
			rationale: "hold: negative count",
		},
		{
			// Defect 4 of issue 7: a reload raising min_workers during an
			// outage was ignored until the source came back.
			name:      "hold still raises the pool to a raised min_workers",
			params:    func(p *Params) { p.MinWorkers = 500; p.MaxWorkers = 600 },
			obs:       Observation{Valid: false, Current: 100},
			want:      500,
			action:    ScaleUp,
			rationale: "scale-up: source unavailable, holding within bounds: raised to min_workers 500",
		},
		{
			name:      "hold still lowers the pool to a lowered max_workers",
			params:    func(p *Params) { p.MaxWorkers = 4 },
			obs:       obs(-1, 0, 8),
			want:      4,
			action:    ScaleDown,
			rationale: "scale-down: negative count, holding within bounds: lowered to max_workers 4",
		},
		{
			// A lowered max_workers: 100 workers against max 95 is within
			// the 10% band, but the band must not keep the pool above max.
			name:   "tolerance does not hold a pool above max",
			params: func(p *Params) { p.MaxWorkers = 95 },
			obs:    obs(10_000, 0, 100),
			want:   95,
			action: ScaleDown,
		},
		{
			name:   "tolerance does not hold a pool below min",
			params: func(p *Params) { p.MinWorkers = 20; p.MaxWorkers = 30 },
			obs:    obs(0, 0, 19),
			want:   20,
			action: ScaleUp,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := flexiqParams()
			if tt.params != nil {
				tt.params(&p)
			}
			var r Recommender
			d := r.Decide(epoch, p, tt.obs)
			if d.Desired != tt.want || d.Action != tt.action {
				t.Errorf("Decide = %d %s, want %d %s (%s)", d.Desired, d.Action, tt.want, tt.action, d.Rationale)
			}
			if !strings.HasPrefix(d.Rationale, string(tt.action)+":") {
				t.Errorf("rationale %q does not start with the action", d.Rationale)
			}
			if tt.rationale != "" && !strings.HasPrefix(d.Rationale, tt.rationale) {
				t.Errorf("rationale = %q, want prefix %q", d.Rationale, tt.rationale)
			}
		})
	}
}

// aged is an observation whose oldest ready job has waited age.
func aged(pending, running int64, current int, age time.Duration) Observation {
	o := obs(pending, running, current)
	o.OldestAge, o.OldestKnown = age, true
	return o
}

func TestLatencySignal(t *testing.T) {
	target := func(d time.Duration) func(*Params) {
		return func(p *Params) { p.TargetQueueLatency = d; p.MaxWorkers = 20 }
	}
	tests := []struct {
		name      string
		params    func(*Params)
		obs       Observation
		want      int
		action    Action
		latency   int
		used      bool
		rationale string // prefix
	}{
		{
			name:      "off: an old job asks for nothing",
			obs:       aged(5, 0, 2, time.Hour),
			want:      1,
			action:    ScaleDown,
			rationale: "scale-down: depth=1 busy=0 cpu=- latency=- overload=false",
		},
		{
			name:      "on, age unknown: no signal",
			params:    target(5 * time.Second),
			obs:       obs(5, 0, 2),
			want:      1,
			action:    ScaleDown,
			rationale: "scale-down: depth=1 busy=0 cpu=- latency=- overload=false",
		},
		{
			// 2 workers, the oldest job waited twice the target: twice the
			// workers, though the depth signal asks for 1.
			name:      "age twice the target doubles the pool",
			params:    target(5 * time.Second),
			obs:       aged(5, 0, 2, 10*time.Second),
			want:      4,
			action:    ScaleUp,
			latency:   4,
			used:      true,
			rationale: "scale-up: depth=1 busy=0 cpu=- latency=4 overload=false",
		},
		{
			// 2 x 10/5 is exactly 4: no fifth worker for a rounding error.
			name:    "exact multiple is not rounded up",
			params:  target(300 * time.Millisecond),
			obs:     aged(1, 0, 3, 900*time.Millisecond),
			want:    9,
			action:  ScaleUp,
			latency: 9,
			used:    true,
		},
		{
			// 2 x 10.1/5 = 4.04.
			name:    "just past a multiple rounds up",
			params:  target(5 * time.Second),
			obs:     aged(1, 0, 2, 10100*time.Millisecond),
			want:    5,
			action:  ScaleUp,
			latency: 5,
			used:    true,
		},
		{
			// 4 x 2/5 = 1.6: the queue is served well within the target, so
			// the signal lets the pool shrink to 2.
			name:    "young queue asks for fewer workers",
			params:  target(5 * time.Second),
			obs:     aged(1, 0, 4, 2*time.Second),
			want:    2,
			action:  ScaleDown,
			latency: 2,
			used:    true,
		},
		{
			name:      "idle pool with a waiting job starts one worker",
			params:    func(p *Params) { target(5 * time.Second)(p); p.MinWorkers = 0; p.TargetQueueDepthPerWorker = 1000 },
			obs:       aged(1, 0, 0, time.Millisecond),
			want:      1,
			action:    ScaleUp,
			latency:   1,
			used:      true,
			rationale: "scale-up: depth=1 busy=0 cpu=- latency=1 overload=false",
		},
		{
			// The depth signal alone would start one too: set the target so
			// high that only the latency signal can.
			name:    "idle pool, an hour-old job still asks for one worker",
			params:  func(p *Params) { target(5 * time.Second)(p); p.MinWorkers = 0 },
			obs:     aged(0, 0, 0, time.Hour),
			want:    1,
			action:  ScaleUp,
			latency: 1,
			used:    true,
		},
		{
			name:      "zero age asks for nothing",
			params:    func(p *Params) { target(5 * time.Second)(p); p.MinWorkers = 0 },
			obs:       aged(0, 0, 0, 0),
			want:      0,
			action:    Stable,
			used:      true,
			rationale: "stable: depth=0 busy=0 cpu=- latency=0 overload=false",
		},
		{
			// The queue's clock ahead of ours.
			name:   "negative age asks for nothing",
			params: func(p *Params) { target(5 * time.Second)(p); p.MinWorkers = 0 },
			obs:    aged(0, 0, 3, -time.Minute),
			want:   0,
			action: ScaleDown,
			used:   true,
		},
		{
			name:    "clamped to max_workers",
			params:  target(5 * time.Second),
			obs:     aged(1, 0, 8, time.Minute),
			want:    20,
			action:  ScaleUp,
			latency: 96,
			used:    true,
		},
		{
			// Far beyond int range in float; the count saturates.
			name:    "absurd age saturates",
			params:  target(time.Millisecond),
			obs:     aged(1, 0, 1<<30, 1<<62),
			want:    20,
			action:  ScaleDown,
			latency: maxCount,
			used:    true,
		},
		{
			name:   "held at min_workers",
			params: func(p *Params) { target(time.Minute)(p); p.MinWorkers = 3 },
			obs:    aged(1, 0, 6, time.Second),
			want:   3,
			action: ScaleDown,
			// ceil(6 x 1/60) = 1.
			latency: 1,
			used:    true,
		},
		{
			name:    "depth still wins when it asks for more",
			params:  target(5 * time.Second),
			obs:     aged(150, 0, 2, 5*time.Second),
			want:    15,
			action:  ScaleUp,
			latency: 2,
			used:    true,
		},
		{
			// 10 x 5.5/5 = 11: |11-10|/10 = 0.1 is not < 0.1.
			name:    "tolerance edge lets the latency signal act",
			params:  target(5 * time.Second),
			obs:     aged(1, 0, 10, 5500*time.Millisecond),
			want:    11,
			action:  ScaleUp,
			latency: 11,
			used:    true,
		},
		{
			name:      "tolerance band suppresses a small latency step",
			params:    func(p *Params) { target(5 * time.Second)(p); p.Tolerance = 0.2 },
			obs:       aged(1, 0, 10, 5500*time.Millisecond),
			want:      10,
			action:    Stable,
			latency:   11,
			used:      true,
			rationale: "stable: depth=1 busy=0 cpu=- latency=11 overload=false (within tolerance)",
		},
		{
			name:      "a hold ignores the age",
			params:    target(5 * time.Second),
			obs:       Observation{Current: 2, OldestAge: time.Hour, OldestKnown: true},
			want:      2,
			action:    Hold,
			rationale: "hold: source unavailable",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := flexiqParams()
			if tt.params != nil {
				tt.params(&p)
			}
			var r Recommender
			d := r.Decide(epoch, p, tt.obs)
			if d.Desired != tt.want || d.Action != tt.action {
				t.Errorf("Decide = %d %s, want %d %s (%s)", d.Desired, d.Action, tt.want, tt.action, d.Rationale)
			}
			if d.Latency != tt.latency || d.LatencyUsed != tt.used {
				t.Errorf("latency = %d (used %t), want %d (used %t)", d.Latency, d.LatencyUsed, tt.latency, tt.used)
			}
			if tt.rationale != "" && !strings.HasPrefix(d.Rationale, tt.rationale) {
				t.Errorf("rationale = %q, want prefix %q", d.Rationale, tt.rationale)
			}
		})
	}
}

// The latency signal only ever adds demand: on any single tick, a pool with
// it on wants at least as many workers as the same pool with it off.
func TestLatencyOnlyAdds(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for i := range 20000 {
		p, o := randomTick(rng)
		off := p
		off.TargetQueueLatency = 0
		var a, b Recommender
		on, without := a.Decide(epoch, p, o), b.Decide(epoch, off, o)
		if on.Desired < without.Desired {
			t.Fatalf("case %d: latency on wants %d < %d with it off\n%+v\n%+v\n%s\n%s",
				i, on.Desired, without.Desired, p, o, on.Rationale, without.Rationale)
		}
	}
}

// tick is one step of a multi-tick scenario. current is fed in as observed;
// the scenarios do not assume the actuator obeyed.
type tick struct {
	at      time.Duration
	obs     Observation
	desired int
	action  Action
}

func runTicks(t *testing.T, p Params, ticks []tick) *Recommender {
	t.Helper()
	var r Recommender
	for i, tk := range ticks {
		d := r.Decide(epoch.Add(tk.at), p, tk.obs)
		if d.Desired != tk.desired || d.Action != tk.action {
			t.Errorf("tick %d (t=%v): got %d %s, want %d %s (%s)",
				i, tk.at, d.Desired, d.Action, tk.desired, tk.action, d.Rationale)
		}
	}
	return &r
}

func TestStabilisation(t *testing.T) {
	down300 := flexiqParams()
	down300.ScaleDownWindow = 300 * time.Second

	t.Run("burst then lull holds the high value inside the window", func(t *testing.T) {
		runTicks(t, down300, []tick{
			{0, obs(100, 0, 2), 10, ScaleUp},
			{5 * time.Second, obs(0, 0, 10), 10, Stable},
			{150 * time.Second, obs(0, 0, 10), 10, Stable},
			// The burst's sample at t=0 is still after now-300s.
			{299 * time.Second, obs(0, 0, 10), 10, Stable},
		})
	})

	t.Run("scales down once the window has passed", func(t *testing.T) {
		runTicks(t, down300, []tick{
			{0, obs(100, 0, 2), 10, ScaleUp},
			{5 * time.Second, obs(0, 0, 10), 10, Stable},
			// At exactly 300s the burst sample is at the cutoff, not after it.
			{300 * time.Second, obs(0, 0, 10), 1, ScaleDown},
		})
	})

	t.Run("scale-down follows the highest recommendation left in the window", func(t *testing.T) {
		runTicks(t, down300, []tick{
			{0, obs(100, 0, 2), 10, ScaleUp},
			{100 * time.Second, obs(50, 0, 10), 10, Stable},
			{200 * time.Second, obs(0, 0, 10), 10, Stable},
			// The 10 has left the window; the 5 at t=100 has not.
			{301 * time.Second, obs(0, 0, 10), 5, ScaleDown},
			{401 * time.Second, obs(0, 0, 5), 1, ScaleDown},
		})
	})

	t.Run("scale-up window delays up-scaling to the window minimum", func(t *testing.T) {
		p := flexiqParams()
		p.MaxWorkers = 20
		p.ScaleUpWindow = 60 * time.Second
		runTicks(t, p, []tick{
			{0, obs(20, 0, 2), 2, Stable},
			// Raw 10, but the window still remembers 2.
			{30 * time.Second, obs(100, 0, 2), 2, Stable},
			// Raw 15; t=0 is still inside the window, so still 2.
			{45 * time.Second, obs(150, 0, 2), 2, Stable},
			// t=0 has left; the window holds 10 and 15, so up = 10.
			{61 * time.Second, obs(200, 0, 2), 10, ScaleUp},
			{106 * time.Second, obs(200, 0, 10), 20, ScaleUp},
		})
	})

	t.Run("overload is not held back by the scale-up window", func(t *testing.T) {
		p := flexiqParams()
		p.ScaleUpWindow = 600 * time.Second
		runTicks(t, p, []tick{
			{0, obs(0, 0, 2), 1, ScaleDown},
			// busy=ceil(12/4/0.75)=4 wants 4, the window allows 1, overload
			// forces C+1.
			{5 * time.Second, obs(0, 12, 2), 3, ScaleUp},
		})
	})

	t.Run("holds are not recorded", func(t *testing.T) {
		r := runTicks(t, down300, []tick{
			{0, Observation{Current: 5}, 5, Hold},
			{5 * time.Second, obs(-3, 0, 5), 5, Hold},
			// Nothing in the window from the holds, so scale-down is free.
			{10 * time.Second, obs(0, 0, 5), 1, ScaleDown},
		})
		if len(r.history) != 1 {
			t.Errorf("history has %d samples, want 1", len(r.history))
		}
	})
}

func TestPruning(t *testing.T) {
	p := flexiqParams()
	p.ScaleUpWindow = 30 * time.Second
	p.ScaleDownWindow = 60 * time.Second
	var r Recommender
	for i := range 100 {
		// Alternating demand: no two consecutive recommendations are
		// equal, so none is merged with the next.
		r.Decide(epoch.Add(time.Duration(i)*5*time.Second), p, obs(int64(i%2)*150, 0, 1))
	}
	// The longer window (60s) at a 5s tick keeps the samples at
	// now-55s..now: 12 of them.
	if len(r.history) != 12 {
		t.Fatalf("history has %d samples, want 12", len(r.history))
	}
	last := epoch.Add(99 * 5 * time.Second)
	for _, s := range r.history {
		if !s.at.After(last.Add(-p.ScaleDownWindow)) {
			t.Errorf("sample at %v outlived the window", s.at)
		}
	}

	// With both windows off nothing needs remembering.
	p.ScaleUpWindow, p.ScaleDownWindow = 0, 0
	r = Recommender{}
	for i := range 10 {
		r.Decide(epoch.Add(time.Duration(i)*time.Second), p, obs(0, 0, 1))
	}
	if len(r.history) != 0 {
		t.Errorf("history has %d samples with windows off, want 0", len(r.history))
	}
}

// randomTick draws parameters and an observation that are valid by the
// config package's rules, with a fair share of holds, C outside the bounds,
// zero workers and overload.
func randomTick(rng *rand.Rand) (Params, Observation) {
	minW := rng.Intn(4)
	p := Params{
		MinWorkers:                minW,
		MaxWorkers:                max(1, minW) + rng.Intn(12),
		TargetQueueDepthPerWorker: 1 + rng.Float64()*30,
		TargetUtilisation:         0.05 + rng.Float64()*0.95,
		ThreadsPerWorker:          1 + rng.Intn(8),
		Tolerance:                 rng.Float64() * 0.5,
		ScaleUpWindow:             time.Duration(rng.Intn(3)) * 30 * time.Second,
		ScaleDownWindow:           time.Duration(rng.Intn(3)) * 150 * time.Second,
	}
	if rng.Intn(2) == 0 {
		p.TargetCPUUtilisation = 0.1 + rng.Float64()*0.9
	}
	if rng.Intn(2) == 0 {
		p.TargetQueueLatency = time.Duration(1+rng.Intn(120)) * time.Second
	}
	o := Observation{
		Valid:    rng.Intn(10) != 0,
		Pending:  rng.Int63n(500) - 10,
		Running:  rng.Int63n(100) - 5,
		Current:  rng.Intn(25),
		CPU:      rng.Float64() * 1.5,
		CPUKnown: rng.Intn(3) != 0,
	}
	if rng.Intn(3) != 0 {
		o.OldestAge, o.OldestKnown = time.Duration(rng.Int63n(int64(10*time.Minute)))-time.Second, true
	}
	return p, o
}

func TestProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for run := range 200 {
		// Params stay fixed over one run, as they do between reloads.
		p, _ := randomTick(rng)
		var a, b Recommender
		now := epoch
		for i := range 200 {
			_, o := randomTick(rng)
			now = now.Add(time.Duration(rng.Intn(20)) * time.Second)
			da := a.Decide(now, p, o)
			db := b.Decide(now, p, o)
			if da != db {
				t.Fatalf("run %d tick %d: two recommenders disagree:\n%+v\n%+v", run, i, da, db)
			}
			hold := !o.Valid || o.Pending < 0 || o.Running < 0
			switch {
			case hold:
				// Missing data moves the pool only back within its bounds.
				if want := max(min(o.Current, p.MaxWorkers), p.MinWorkers); da.Desired != want {
					t.Fatalf("run %d tick %d: hold moved the pool to %d, want %d: %+v", run, i, da.Desired, want, da)
				}
			case da.Desired < p.MinWorkers || da.Desired > p.MaxWorkers:
				// Including when Current was outside the bounds.
				t.Fatalf("run %d tick %d: desired %d outside [%d,%d] (current %d): %s",
					run, i, da.Desired, p.MinWorkers, p.MaxWorkers, o.Current, da.Rationale)
			}
			if want := actionFor(da.Desired, o.Current, hold); da.Action != want {
				t.Fatalf("run %d tick %d: action %s for %d -> %d", run, i, da.Action, o.Current, da.Desired)
			}
		}
	}
}

func actionFor(desired, current int, hold bool) Action {
	switch {
	case hold && desired == current:
		return Hold
	case desired > current:
		return ScaleUp
	case desired < current:
		return ScaleDown
	}
	return Stable
}

func BenchmarkDecide(b *testing.B) {
	p := flexiqParams()
	p.TargetCPUUtilisation = 0.8
	p.ScaleDownWindow = 300 * time.Second
	var r Recommender
	now := epoch
	o := Observation{Valid: true, Current: 4, CPU: 0.5, CPUKnown: true}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(5 * time.Second)
		o.Pending = int64(i % 200)
		o.Running = int64(i % 17)
		r.Decide(now, p, o)
	}
}

// The history survives a restart of the daemon through History and Restore;
// Seed stands in for it when there is none, as the HPA seeds a new target
// with its current replica count.
func TestHistoryRestoreAndSeed(t *testing.T) {
	p := flexiqParams()
	p.ScaleDownWindow = 300 * time.Second
	lull := obs(0, 0, 8)

	t.Run("restored history holds the pool through its window", func(t *testing.T) {
		var before Recommender
		before.Decide(epoch, p, obs(120, 0, 8)) // raw 8 at t=0
		var after Recommender
		after.Restore(epoch.Add(10*time.Second), before.History())
		if d := after.Decide(epoch.Add(10*time.Second), p, lull); d.Desired != 8 {
			t.Errorf("after restore: desired %d, want 8 (held by the window): %s", d.Desired, d.Rationale)
		}
		if d := after.Decide(epoch.Add(301*time.Second), p, lull); d.Desired != 1 {
			t.Errorf("after the window: desired %d, want 1: %s", d.Desired, d.Rationale)
		}
	})
	t.Run("without history the first tick drops at once", func(t *testing.T) {
		var fresh Recommender
		if d := fresh.Decide(epoch, p, lull); d.Desired != 1 {
			t.Errorf("fresh: desired %d, want 1 (the defect Seed and Restore fix)", d.Desired)
		}
	})
	t.Run("seeded with the adopted count", func(t *testing.T) {
		var r Recommender
		r.Seed(epoch, 8)
		if d := r.Decide(epoch.Add(5*time.Second), p, lull); d.Desired != 8 {
			t.Errorf("seeded: desired %d, want 8: %s", d.Desired, d.Rationale)
		}
	})
	t.Run("samples from the future are dropped", func(t *testing.T) {
		var r Recommender
		r.Restore(epoch, []Sample{{At: epoch.Add(time.Hour), Raw: 8}, {At: epoch, Raw: 3}})
		if h := r.History(); len(h) != 1 || h[0].Raw != 3 {
			t.Errorf("history %v, want only the sample at or before now", h)
		}
	})
}

// The history keeps only the latest of a run of equal recommendations, which
// changes no decision (TestProperties and the window tests hold) and keeps
// it small however often a pool ticks.
func TestHistoryGrowsWithChangesNotTicks(t *testing.T) {
	p := flexiqParams()
	p.ScaleDownWindow = 300 * time.Second
	var r Recommender
	now := epoch
	for i := range 1200 { // 300 s at four ticks a second
		now = now.Add(250 * time.Millisecond)
		pending := int64(60)
		if i >= 600 {
			pending = 30
		}
		r.Decide(now, p, obs(pending, 0, 4))
	}
	if h := r.History(); len(h) != 2 {
		t.Errorf("history of %d samples, want 2 (one per value): %v", len(h), h)
	}
}
