package workload

import (
	"fmt"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// p4Recommended is the recommended P4 setting of docs/simulate.md (issue
// 17): Little's law over 7 s, target utilisation 0.95, a 0.6 band, depth 1,
// no down window; 1-thread workers, min 1, max 20.
func p4Recommended() policy.Params {
	p := p4Params()
	p.TargetUtilisation, p.Tolerance, p.DemandWindow = 0.95, 0.6, 7*time.Second
	return p
}

// Issue 17's P4 target at every one of the ten phases of the code trace's
// arrivals against the ticks (shift 0, 0.5, ..., 4.5 s): at most 31,000
// worker-seconds and 150 actions. The p95 target (25 s) is out of this
// setting's reach (docs/simulate.md says why); the test holds the p95 at the
// worst documented, 25.41 s, so that a change that loses it says so there.
// The previous P4 setting fails it (31,117 worker-seconds, 156 actions at
// shifts 0.5 and 3.5 s).
func TestP4TenPhases(t *testing.T) {
	jobs := readCodeTrace(t, "azure-llm-code-2023.csv")
	for i := range 10 {
		shift := time.Duration(i) * 500 * time.Millisecond
		t.Run(fmt.Sprintf("shift %s", shift), func(t *testing.T) {
			cfg := crossConfig(p4Recommended())
			cfg.Shift = shift
			r, err := Run(jobs, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.WorkerSeconds > 31000 || r.Actions > 150 || r.WaitP95 > 25.41+0.005 {
				t.Errorf("%.0f worker-seconds, p95 %.2f s, %d actions; want at most 31,000, 25.41 s and 150",
					r.WorkerSeconds, r.WaitP95, r.Actions)
			}
		})
	}
}
