package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/source"
)

// The oldest ready job's age reaches the policy, and the decision entry
// carries it with the latency signal.
func TestOldestAgeReachesThePolicyAndTheJournal(t *testing.T) {
	cfg := testPool("work")
	cfg.TargetQueueDepthPerWorker = 1000
	cfg.TargetQueueLatencySec = 5
	r := newRig(t, cfg)
	r.start(r.pool)
	r.tick(time.Second)
	if n := len(r.pool.workers.Slots.Live); n != 1 {
		t.Fatalf("%d live workers after the first tick, want min_workers 1", n)
	}

	// One worker, the oldest job waited 12.5 s against 5: ceil(2.5) = 3.
	r.src.mu.Lock()
	r.src.counts = source.Counts{Pending: 4, OldestAge: 12500 * time.Millisecond, HasOldest: true}
	r.src.mu.Unlock()
	r.tick(time.Second)
	if n := len(r.pool.workers.Slots.Live); n != 3 {
		t.Errorf("%d live workers, want 3 by the latency signal", n)
	}
	got := r.lines(`FLEXIQ_ACTION="scale-up"`, `FLEXIQ_OLDEST_AGE="12.5"`, "latency=3", "oldest=12.5s")
	if len(got) != 1 {
		t.Errorf("want one scale-up entry with the age and latency=3; journal:\n%s", r.log.String())
	}

	// Without an age the signal sits out (the scale-down window holds the
	// pool at 3, a new action and so a new entry), and there is no field.
	r.src.set(4, 0, nil)
	r.tick(time.Second)
	stable := r.lines(`FLEXIQ_ACTION="stable"`, `FLEXIQ_DESIRED="3"`, "latency=-")
	if len(stable) != 1 {
		t.Fatalf("want one stable entry with latency=-; journal:\n%s", r.log.String())
	}
	if strings.Contains(stable[0], "FLEXIQ_OLDEST_AGE") || strings.Contains(stable[0], "oldest=") {
		t.Errorf("an entry without an age carries one: %s", stable[0])
	}
}
