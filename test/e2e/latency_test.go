package e2e

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The queue latency signal scales a pool whose backlog is far too small for
// its depth target: the workers are busy with long jobs, the jobs behind them
// wait, and once the oldest has waited past target_queue_latency_sec the
// pool grows, by the latency signal alone. The decision entry carries the
// age (FLEXIQ_OLDEST_AGE) and the signal (latency=N in the rationale).
func TestLatencySignalScalesUp(t *testing.T) {
	parallel(t)
	const pool, target = "latency", 2.0
	e := setup(t)
	// One thread per worker, fully used when busy: the busy signal asks for
	// exactly the workers there are, and a depth target of 1000 asks for one.
	e.Configure(e.poolConfig(pool, `
min_workers = 1
max_workers = 3
target_queue_depth_per_worker = 1000
threads_per_worker = 1
target_utilisation = 1.0
target_queue_latency_sec = 2
`))
	e.StartDaemon()
	e.waitWorkers(pool, 1, 10*time.Second)

	// Six 6-second jobs: the worker takes one, five wait and age.
	e.Enqueue(6, 6*time.Second)
	e.Eventually(20*time.Second, "a scale-up by the latency signal", func() (bool, string) {
		ws := e.Workers(pool, "active", "activating")
		return len(ws) >= 2, "workers: " + strconv.Itoa(len(ws))
	})

	// Every scale-up was the latency signal's: depth asked for one, and
	// latency for at least the new target; the age was past the target.
	rationale := regexp.MustCompile(`\(scale-up: depth=1 busy=\d+ cpu=- latency=(\d+) overload=false`)
	var scaleUps int
	for _, en := range e.Entries("FLEXIQ_POOL="+pool, decisionID, "FLEXIQ_ACTION=scale-up") {
		msg, desired := en.Field("MESSAGE"), en.Field("FLEXIQ_DESIRED")
		if desired == "1" {
			continue // the start at min_workers, before any job
		}
		scaleUps++
		t.Logf("FLEXIQ_OLDEST_AGE=%s %s", en.Field("FLEXIQ_OLDEST_AGE"), msg)
		m := rationale.FindStringSubmatch(msg)
		want, _ := strconv.Atoi(desired)
		if m == nil {
			e.Errorf("scale-up to %s without the latency signal in its rationale: %s", desired, msg)
			continue
		}
		if latency, _ := strconv.Atoi(m[1]); latency < want {
			e.Errorf("scale-up to %d with latency=%d: not the latency signal's doing: %s", want, latency, msg)
		}
		age, err := strconv.ParseFloat(en.Field("FLEXIQ_OLDEST_AGE"), 64)
		if err != nil || age <= target {
			e.Errorf("scale-up to %s with FLEXIQ_OLDEST_AGE=%q, want an age past the %g s target: %s",
				desired, en.Field("FLEXIQ_OLDEST_AGE"), target, msg)
		}
	}
	if scaleUps == 0 {
		e.Errorf("no scale-up decision entry above min_workers")
	}
}
