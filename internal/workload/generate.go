package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Synthetic trace kinds.
const (
	GenPoisson = "poisson" // constant rate
	GenDiurnal = "diurnal" // rate follows a sine, one cycle over the duration, from 0.2× to 1.8× the mean
	GenOnOff   = "onoff"   // bursts: OnSec at Burst× the mean rate, then silence, repeated
)

// GenSpec describes a synthetic trace. Service times are exponential with
// mean MeanService, plus MinService: heavy enough a tail to queue, never 0.
type GenSpec struct {
	Kind        string
	Duration    float64 // seconds
	Rate        float64 // mean arrivals per second
	MeanService float64
	MinService  float64
	// On/off: a period of PeriodSec, of which OnSec carries all the
	// arrivals (so the mean rate is still Rate).
	PeriodSec, OnSec float64
	Seed             uint64
}

// Generate makes a synthetic trace, sorted by arrival, reproducible from
// its seed. Arrivals are a (possibly non-homogeneous) Poisson process,
// drawn by thinning against the peak rate.
func Generate(g GenSpec) ([]Job, error) {
	switch {
	case g.Duration <= 0 || g.Rate <= 0:
		return nil, fmt.Errorf("duration and rate must be > 0")
	case g.MeanService < 0 || g.MinService < 0:
		return nil, fmt.Errorf("service times must be >= 0")
	}
	var rate func(t float64) float64
	var peak float64
	switch g.Kind {
	case GenPoisson:
		rate, peak = func(float64) float64 { return g.Rate }, g.Rate
	case GenDiurnal:
		rate = func(t float64) float64 { return g.Rate * (1 - 0.8*math.Cos(2*math.Pi*t/g.Duration)) }
		peak = 1.8 * g.Rate
	case GenOnOff:
		if g.PeriodSec <= 0 || g.OnSec <= 0 || g.OnSec > g.PeriodSec {
			return nil, fmt.Errorf("onoff: want 0 < on <= period")
		}
		peak = g.Rate * g.PeriodSec / g.OnSec
		rate = func(t float64) float64 {
			if math.Mod(t, g.PeriodSec) < g.OnSec {
				return peak
			}
			return 0
		}
	default:
		return nil, fmt.Errorf("unknown kind %q (want %s, %s or %s)", g.Kind, GenPoisson, GenDiurnal, GenOnOff)
	}
	rng := rand.New(rand.NewPCG(g.Seed, 0x5eed))
	var jobs []Job
	for t := 0.0; ; {
		t += rng.ExpFloat64() / peak
		if t >= g.Duration {
			return jobs, nil
		}
		if rng.Float64()*peak >= rate(t) {
			continue
		}
		jobs = append(jobs, Job{Arrival: t, Service: g.MinService + rng.ExpFloat64()*g.MeanService})
	}
}
