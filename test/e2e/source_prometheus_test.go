package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/servers"
)

// Prometheus sources against Debian's prometheus, started inside the
// sandbox, scraping a metrics file that the test rewrites (served by
// python3's http.server, also inside the sandbox): the gauges of a queue
// that exports its depth.

// exporter serves dir/metrics over HTTP inside the sandbox, as a transient
// unit: in the sandbox's own network, or in the network namespace netns.
type exporter struct {
	e   *env
	dir string
}

func startExporter(e *env, unit, addr string, port int, netns string) *exporter {
	e.T.Helper()
	x := &exporter{e: e, dir: "/var/lib/" + unit}
	e.Sh("mkdir -p " + x.dir)
	x.set("")
	props := ""
	if netns != "" {
		props = " -p NetworkNamespacePath=/run/netns/" + netns
	}
	e.Sh(fmt.Sprintf("systemctl stop %[1]s 2>/dev/null || true; systemctl reset-failed %[1]s 2>/dev/null || true; systemd-run --quiet --unit %[1]s%[2]s /usr/bin/python3 -m http.server --bind %[3]s --directory %[4]s %[5]d",
		unit, props, addr, x.dir, port))
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e.SB.Exec(ctx, "systemctl", "stop", unit)
	})
	return x
}

// set replaces the metrics at once (a rename), so that no scrape sees half
// a file. Prometheus 2 reads a file of unknown content type as the text
// exposition format.
func (x *exporter) set(metrics string) {
	x.e.T.Helper()
	x.e.Write(x.dir+"/.metrics", metrics)
	x.e.Sh("mv " + x.dir + "/.metrics " + x.dir + "/metrics")
}

// gauges is the exposition text of queue_waiting and queue_running.
func gauges(waiting, running int) string {
	return fmt.Sprintf("# TYPE queue_waiting gauge\nqueue_waiting %d\n# TYPE queue_running gauge\nqueue_running %d\n", waiting, running)
}

// scrapeJob is a scrape_configs entry for one target.
func scrapeJob(job, target string) string {
	return fmt.Sprintf("  - job_name: %s\n    static_configs:\n      - targets: ['%s']\n", job, target)
}

// promPool is a pool of sleeping workers sized by pending alone: 2 pending
// jobs per worker, 0 to 4 workers, ticking every second.
func promPool(name, url, extraSource string) string {
	return fmt.Sprintf(`
[pools.%[1]s]
exec = ["/bin/sleep", "infinity"]
poll_interval_sec = 1
min_workers = 0
max_workers = 4
target_queue_depth_per_worker = 2
threads_per_worker = 1
target_utilisation = 1.0
scale_down_window_sec = 2
drain_timeout_sec = 5
[pools.%[1]s.source]
type = "prometheus"
url = %[2]q
pending_query = "sum(queue_waiting)"
running_query = "sum(queue_running)"
%[3]s
`, name, url, extraSource)
}

// sourceErrors is the pool's source errors logged in this test.
func (e *env) sourceErrors(pool string) []string {
	var errs []string
	for _, en := range e.Entries("FLEXIQ_POOL="+pool, sourceErrorID) {
		errs = append(errs, en.Field("FLEXIQ_ERROR"))
	}
	return errs
}

// waitSourceError waits for a logged source error of pool containing all
// of subs.
func (e *env) waitSourceError(pool string, subs ...string) {
	e.T.Helper()
	e.Eventually(20*time.Second, fmt.Sprintf("source error of pool %s with %q", pool, subs), func() (bool, string) {
		errs := e.sourceErrors(pool)
		for _, err := range errs {
			all := true
			for _, s := range subs {
				all = all && strings.Contains(err, s)
			}
			if all {
				return true, ""
			}
		}
		return false, fmt.Sprintf("errors: %q", errs)
	})
}

// holds checks that the pool stays at n active workers for a while.
func (e *env) holds(pool string, n int, d time.Duration, why string) {
	e.T.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if got := len(e.Workers(pool, "active")); got != n {
			e.Fatalf("%s: %d active workers in pool %s, want a hold at %d", why, got, pool, n)
		}
	}
}

// startPrometheus starts prometheus.service scraping target every second.
// Debian's package enables the service, so the sandbox boots it with the
// package's own configuration, and servers.Prometheus's start would leave
// that running: stop it first, so that the start reads ours.
func startPrometheus(e *env, target string) string {
	e.T.Helper()
	e.Sh("systemctl stop prometheus.service")
	return servers.Prometheus(e.T, e.SB, scrapeJob("queue", target), time.Second)
}

// A pool follows a gauge up and down; an empty result reads as 0 by
// default and holds with empty_result = "hold"; Prometheus stopped mid-run
// holds both pools, and they follow the gauge again once it is back.
func TestPrometheusSource(t *testing.T) {
	parallel(t)
	e := setup(t)
	x := startExporter(e, "flexiq-e2e-exporter", "127.0.0.1", 9101, "")
	x.set(gauges(0, 0))
	prom := startPrometheus(e, "127.0.0.1:9101")
	e.Configure(promPool("zero", prom, "") + promPool("hold", prom, `empty_result = "hold"`))
	e.StartDaemon()

	// Up on a raised gauge: 6 pending, 2 per worker.
	x.set(gauges(6, 0))
	e.waitWorkers("zero", 3, 30*time.Second)
	e.waitWorkers("hold", 3, 10*time.Second)
	// And back down.
	x.set(gauges(0, 0))
	e.waitWorkers("zero", 0, 30*time.Second)
	e.waitWorkers("hold", 0, 10*time.Second)

	// The series disappear from the target: Prometheus marks them stale
	// at the next scrape, and the queries return nothing. "zero" reads
	// that as no work; "hold" keeps its workers and says why.
	x.set(gauges(4, 0))
	e.waitWorkers("zero", 2, 30*time.Second)
	e.waitWorkers("hold", 2, 10*time.Second)
	x.set("# TYPE other gauge\nother 1\n")
	e.waitWorkers("zero", 0, 30*time.Second)
	e.holds("hold", 2, 3*time.Second, "with an empty result and empty_result = \"hold\"")
	e.waitSourceError("hold", "prometheus source "+prom, "pending_query sum(queue_waiting)", "returned no sample")
	if errs := e.sourceErrors("zero"); len(errs) != 0 {
		t.Errorf("pool zero logged source errors for an empty result: %q", errs)
	}
	x.set(gauges(4, 0))
	e.waitWorkers("zero", 2, 30*time.Second)
	e.Eventually(20*time.Second, "pool hold's source recovered", func() (bool, string) {
		n := len(e.Entries("FLEXIQ_POOL=hold", sourceRecoveredID))
		return n > 0, fmt.Sprintf("%d recoveries", n)
	})

	// Prometheus stopped mid-run: a hold for both pools, whatever the gauge
	// says meanwhile.
	e.Sh("systemctl stop prometheus.service")
	x.set(gauges(0, 0))
	e.waitSourceError("zero", "prometheus source "+prom, "connection refused")
	e.holds("zero", 2, 3*time.Second, "with Prometheus stopped")
	e.holds("hold", 2, time.Second, "with Prometheus stopped")
	// Back: both follow the gauge down.
	servers.Prometheus(t, e.SB, scrapeJob("queue", "127.0.0.1:9101"), time.Second)
	e.waitWorkers("zero", 0, 40*time.Second)
	e.waitWorkers("hold", 0, 10*time.Second)
	if n := len(e.Entries("FLEXIQ_POOL=zero", sourceRecoveredID)); n == 0 {
		e.Errorf("pool zero: no source-recovered entry after Prometheus came back")
	}
}
