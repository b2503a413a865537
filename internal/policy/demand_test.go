package policy

import (
	"strings"
	"testing"
	"time"
)

func demandObs(pending, running int64, current int, rate float64, svc time.Duration) Observation {
	o := obs(pending, running, current)
	o.ArrivalRate, o.ServiceTime, o.DemandKnown = rate, svc, true
	return o
}

func TestLittlesLawSignal(t *testing.T) {
	littles := func(p *Params) { p.Demand, p.DemandWindow = DemandLittlesLaw, time.Minute }
	tests := []struct {
		name   string
		params func(*Params)
		obs    Observation
		want   int
		used   bool
		signal int
	}{
		{
			// 2 jobs/s × 6 s = 12 busy threads; 4 threads at 75% = 3 per worker.
			name: "busy threads at target utilisation", params: littles,
			obs: demandObs(0, 0, 1, 2, 6*time.Second), want: 4, used: true, signal: 4,
		},
		{
			name: "off by default: today's policy", params: nil,
			obs: demandObs(0, 0, 1, 2, 6*time.Second), want: 1, used: false,
		},
		{
			name: "unknown rate sits out", params: littles,
			obs: obs(0, 0, 1), want: 1, used: false,
		},
		{
			name: "the largest signal wins: depth above it", params: littles,
			obs: demandObs(100, 0, 1, 0.5, time.Second), want: 10, used: true, signal: 1,
		},
		{
			// 0.1 × 0.3 / 3 = 0.01 of a worker still asks for one.
			name: "a trickle asks for a worker", params: func(p *Params) { littles(p); p.MinWorkers = 0 },
			obs: demandObs(0, 0, 0, 0.1, 300*time.Millisecond), want: 1, used: true, signal: 1,
		},
		{
			name: "no arrivals ask for nothing", params: func(p *Params) { littles(p); p.MinWorkers = 0 },
			obs: demandObs(0, 0, 2, 0, 5*time.Second), want: 0, used: true, signal: 0,
		},
		{
			name: "clamped to max_workers", params: littles,
			obs: demandObs(0, 0, 5, 100, 10*time.Second), want: 10, used: true, signal: 334,
		},
		{
			name: "a negative rate (a clock step) sits out", params: littles,
			obs: demandObs(0, 0, 3, -1, time.Second), want: 1, used: false,
		},
		{
			// 1 thread per worker at 100%: L itself.
			name: "one thread at full utilisation is L", params: func(p *Params) { littles(p); p.ThreadsPerWorker, p.TargetUtilisation = 1, 1 },
			obs: demandObs(0, 0, 1, 2.5, 2*time.Second), want: 5, used: true, signal: 5,
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
			if d.Desired != tt.want || d.LittlesLawUsed != tt.used || d.LittlesLaw != tt.signal {
				t.Errorf("Desired, LittlesLawUsed, LittlesLaw = %d, %t, %d; want %d, %t, %d (%s)",
					d.Desired, d.LittlesLawUsed, d.LittlesLaw, tt.want, tt.used, tt.signal, d.Rationale)
			}
			if got := strings.Contains(d.Rationale, "littles-law="); got != tt.used {
				t.Errorf("rationale %q: mentions littles-law = %t, want %t", d.Rationale, got, tt.used)
			}
		})
	}
}

// With the signal on, a burst that has drained leaves the pool at what the
// window's arrivals predict, not at min_workers: the signal is a floor that
// follows the recent load, within the ordinary down window.
func TestLittlesLawHoldsAfterBurst(t *testing.T) {
	p := flexiqParams()
	p.Demand, p.DemandWindow = DemandLittlesLaw, 30*time.Second
	var r Recommender
	d := r.Decide(epoch, p, demandObs(100, 0, 1, 3, 4*time.Second))
	if d.Desired != 10 {
		t.Fatalf("burst: Desired = %d, want 10 (%s)", d.Desired, d.Rationale)
	}
	// Queue empty, recent rate still 3/s × 4 s = 12 threads = 4 workers.
	d = r.Decide(epoch.Add(5*time.Second), p, demandObs(0, 0, 10, 3, 4*time.Second))
	if d.Desired != 4 {
		t.Errorf("after the burst: Desired = %d, want 4 (%s)", d.Desired, d.Rationale)
	}
}
