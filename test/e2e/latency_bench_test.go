package e2e

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkBurstToFirstWorker measures, with the default 5 s poll, the time
// from a burst landing in a flexiq-sqlite database to the first new worker
// being active (its unit's ActiveEnterTimestampMonotonic; the sandbox shares
// the host's monotonic clock), with event-driven wake-up (inotify on the
// database's -wal) and with polling alone (wake-up turned off with
// FLEXIQ_SCALED_NO_WAKE in a drop-in). Each burst lands at a random phase of
// the tick, so the polling figure includes the wait for the next tick, as a
// real burst would.
//
//	go test -run '^$' -bench BurstToFirstWorker -benchtime 20x ./test/e2e/
func BenchmarkBurstToFirstWorker(b *testing.B) {
	b.Run("wake", func(b *testing.B) { benchBurst(b, true) })
	b.Run("poll", func(b *testing.B) { benchBurst(b, false) })
}

func benchBurst(b *testing.B, wake bool) {
	e := setup(b)
	if !wake {
		// setup's cleanup removes the 90-* drop-ins.
		e.write("/etc/systemd/system/flexiq-scaled.service.d/90-nowake.conf", "[Service]\nEnvironment=FLEXIQ_SCALED_NO_WAKE=1\n")
		e.sh("systemctl daemon-reload")
	}
	e.configure(e.poolConfig("latency", `
poll_interval_sec = 5
min_workers = 1
max_workers = 4
target_queue_depth_per_worker = 5
scale_down_window_sec = 0
`))
	e.startDaemon()
	e.waitWorkers("latency", 1, 15*time.Second)
	if line := e.wakeUpLine("latency"); strings.Contains(line, "wake-up is active") != wake {
		b.Fatalf("wake-up should be %v, the journal says %q", wake, line)
	}
	var samples []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		time.Sleep(time.Duration(rand.Float64() * float64(5*time.Second)))
		b.StartTimer()
		landed := monotonicUsec()
		e.enqueue(20, 2*time.Second)
		var first int64
		e.eventually(30*time.Second, "a second worker", func() (bool, string) {
			for _, u := range e.workers("latency", "active") {
				if u == "flexiq-latency@1.service" {
					continue
				}
				at, _ := strconv.ParseInt(e.unitProp(u, "ActiveEnterTimestampMonotonic"), 10, 64)
				if at > landed && (first == 0 || at < first) {
					first = at
				}
			}
			return first != 0, ""
		})
		samples = append(samples, float64(first-landed)/1e6)
		b.StopTimer()
		// Cancel what is left and let the pool fall back to one worker.
		if _, err := e.db.Exec("UPDATE jobs SET status = 5 WHERE status = 0"); err != nil {
			b.Fatal(err)
		}
		e.waitWorkers("latency", 1, 60*time.Second)
		b.StartTimer()
	}
	slices.Sort(samples)
	b.ReportMetric(samples[len(samples)/2], "s-median")
	b.ReportMetric(samples[0], "s-min")
	b.ReportMetric(samples[len(samples)-1], "s-max")
	b.Logf("burst → first new worker active, %d samples (s): %v", len(samples), samples)
}

func monotonicUsec() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano() / 1000
}
