package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// limitsWorkers is the fleet that the daemon unit's MemoryMax= and TasksMax=
// are sized from (docs/security.md): twice the P3 fleet.
const limitsWorkers = 1000

// procStatus reads numeric fields of a host process's /proc/PID/status (kB
// for the memory ones).
func procStatus(pid int, keys ...string) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !slices.Contains(keys, k) {
			continue
		}
		if f := strings.Fields(v); len(f) > 0 {
			out[k], _ = strconv.ParseInt(f[0], 10, 64)
		}
	}
	return out
}

// BenchmarkDaemonLimits measures what the daemon costs at 1,000 idle
// workers, for the unit's MemoryMax= and TasksMax=: its peak resident set
// (VmHWM, which the kernel keeps over the process's life: the scale-out from
// 0 to 1,000 included) and its threads (sampled every 50 ms; TasksMax=
// counts every thread), then the same after a restart that adopts the 1,000
// running workers, while the operator's commands and a scrape read the
// whole fleet once per poll. (The sandbox's cgroup tree has no memory or
// pids controller on a host with cgroup v1 controllers, so memory.peak and
// pids.peak are not there to read.) It is a bounded run, not a timed
// assertion: it reports figures. A drop-in lifts the shipped limits, so
// that the figures are what the daemon takes, not what it is allowed.
func BenchmarkDaemonLimits(b *testing.B) {
	const pool = "idle"
	e := setup(b)
	conf := "[Service]\nWatchdogSec=0\nMemoryMax=infinity\nTasksMax=infinity\n"
	// FLEXIQ_BENCH_GOMAXPROCS plays a host with more CPUs: the daemon's
	// threads grow with GOMAXPROCS, not with the workers.
	if v := os.Getenv("FLEXIQ_BENCH_GOMAXPROCS"); v != "" {
		conf += "Environment=GOMAXPROCS=" + v + "\n"
	}
	e.Write("/etc/systemd/system/flexiq-scaled.service.d/90-limits.conf", conf)
	e.Sh("systemctl daemon-reload")
	e.Configure(e.poolConfig(pool, fmt.Sprintf(`exec = ["/bin/sleep", "infinity"]
threads_per_worker = 1
poll_interval_sec = 5
min_workers = %d
max_workers = %d
`, limitsWorkers, limitsWorkers)))
	// sample follows the daemon's threads until stop is closed.
	sample := func(pid int, stop chan struct{}) *atomic.Int64 {
		peak := new(atomic.Int64)
		go func() {
			for {
				if n := procStatus(pid, "Threads")["Threads"]; n > peak.Load() {
					peak.Store(n)
				}
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
		return peak
	}
	measure := func(phase string, pid int, threads *atomic.Int64, stop chan struct{}) {
		b.Helper()
		// The operator's reads and a scrape at every poll: status of the
		// whole fleet is the largest answer the daemon writes.
		for range 6 {
			e.Sh("flexiq-scaled status --json >/dev/null && flexiq-scaled explain " + pool + " >/dev/null && " +
				"curl -sf --unix-socket /run/flexiq-scaled/metrics.sock http://localhost/metrics >/dev/null")
			time.Sleep(5 * time.Second)
		}
		close(stop)
		time.Sleep(100 * time.Millisecond)
		st := procStatus(pid, "VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem", "Threads")
		b.Logf("%s: %d workers; daemon peak RSS (VmHWM) %.1f MB, RSS %.1f MB (anon %.1f, file %.1f, shmem %.1f); threads %d, at most %d",
			phase, len(e.Workers(pool, "active")), float64(st["VmHWM"])/1024, float64(st["VmRSS"])/1024,
			float64(st["RssAnon"])/1024, float64(st["RssFile"])/1024, float64(st["RssShmem"])/1024, st["Threads"], threads.Load())
		b.ReportMetric(float64(st["VmHWM"])/1024, phase+"-peak-MB")
		b.ReportMetric(float64(threads.Load()), phase+"-threads-max")
	}
	b.ResetTimer()
	e.StartDaemon()
	pid := hostPID(b, e, e.DaemonPID())
	stop := make(chan struct{})
	threads := sample(pid, stop)
	e.waitWorkers(pool, limitsWorkers, 6*time.Minute)
	measure("scale-out", pid, threads, stop)
	// A restart adopts the fleet.
	e.Sh("systemctl restart " + daemonUnit)
	pid = hostPID(b, e, e.DaemonPID())
	stop = make(chan struct{})
	threads = sample(pid, stop)
	time.Sleep(10 * time.Second)
	measure("adopt", pid, threads, stop)
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
}
