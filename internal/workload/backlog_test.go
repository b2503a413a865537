package workload

import (
	"fmt"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// p4Params are the P4 setting of docs/simulate.md: 1-thread workers, min 1,
// max 20, depth 1, a 0.5 band, no down window, Little's law over 15 s.
func p4Params() policy.Params {
	return policy.Params{
		MinWorkers: 1, MaxWorkers: 20, TargetQueueDepthPerWorker: 1, TargetUtilisation: 0.75,
		ThreadsPerWorker: 1, Tolerance: 0.5, Demand: policy.DemandLittlesLaw, DemandWindow: 15 * time.Second,
	}
}

// Issue 17: a backlog the pool cannot clear within a few ticks is never held
// by the tolerance band. On generated traces the P4 setting (and the
// recommended one, p4_test.go) is held against
// flexiq's defaults with a 30 s down window: never more worker-seconds, and
// a p95 wait at most ClearPolls ticks worse (the time the rule gives a
// backlog). Before the rule, the diurnal traces near capacity sat below
// max_workers under a growing queue: p95 237 s and 617 s.
func TestGeneratedBacklogAgainstDownWindow(t *testing.T) {
	base := crossParams()
	base.ScaleDownWindow = 30 * time.Second
	poll := 5 * time.Second
	slack := (policy.ClearPolls * poll).Seconds()
	for _, g := range []GenSpec{
		{Kind: GenPoisson, Rate: 2.5},
		{Kind: GenDiurnal, Rate: 2.5},
		{Kind: GenOnOff, Rate: 2.5, PeriodSec: 300, OnSec: 60},
		{Kind: GenDiurnal, Rate: 4},
		{Kind: GenDiurnal, Rate: 5},
		{Kind: GenOnOff, Rate: 3, PeriodSec: 300, OnSec: 120},
	} {
		g.Duration, g.MeanService, g.MinService, g.Seed = 3600, 2, 0.5, 1
		t.Run(fmt.Sprintf("%s %g/s", g.Kind, g.Rate), func(t *testing.T) {
			jobs, err := Generate(g)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Run(jobs, crossConfig(base), nil)
			if err != nil {
				t.Fatal(err)
			}
			for name, p := range map[string]policy.Params{"P4 setting": p4Params(), "recommended P4 setting": p4Recommended()} {
				got, err := Run(jobs, crossConfig(p), nil)
				if err != nil {
					t.Fatal(err)
				}
				if got.WorkerSeconds > want.WorkerSeconds || got.WaitP95 > want.WaitP95+slack {
					t.Errorf("%s: %.0f worker-seconds, p95 %.2f s; want at most the 30 s down window's %.0f and %.2f + %.0f s",
						name, got.WorkerSeconds, got.WaitP95, want.WorkerSeconds, want.WaitP95, slack)
				}
			}
		})
	}
}
