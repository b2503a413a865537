package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

const metricsPort = 9958

// installMetricsUnits installs flexiq-scaled-metrics.socket and .service as
// the package ships them, and starts the socket. The group of the daemon's
// metrics.sock, which the proxy joins, is the package's (sysusers.d); the
// daemon sets it when it starts, so call this before startDaemon.
func installMetricsUnits(e *env) {
	e.T.Helper()
	e.Sh("getent group flexiq-scaled >/dev/null || groupadd --system flexiq-scaled")
	root, _ := sandbox.ModuleRoot()
	for _, u := range []string{"flexiq-scaled-metrics.socket", "flexiq-scaled-metrics.service"} {
		b, err := os.ReadFile(filepath.Join(root, "systemd", u))
		if err != nil {
			e.T.Fatal(err)
		}
		e.Write("/etc/systemd/system/"+u, string(b))
	}
	e.Sh("systemctl daemon-reload && systemctl start flexiq-scaled-metrics.socket")
	e.T.Cleanup(func() {
		e.SB.Exec(e.Ctx(), "systemctl", "stop", "flexiq-scaled-metrics.socket", "flexiq-scaled-metrics.service")
	})
}

// promQuery runs an instant query against the sandbox's Prometheus and
// returns the value of its single sample, or false when it has none.
func promQuery(e *env, prom, q string) (float64, bool) {
	e.T.Helper()
	out := e.Sh("curl -sf '" + prom + "/api/v1/query?query=" + url.QueryEscape(q) + "'")
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.T.Fatalf("query %s: %v: %s", q, err, out)
	}
	if len(r.Data.Result) != 1 {
		return 0, false
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// A real Prometheus scrapes the daemon through the socket unit and its
// proxy, and its queries return what the daemon reports: the pool's workers
// and queue as its STATUS= line gives them, a worker's CPU from its cgroup,
// and the daemon's own metrics.
func TestMetricsScrape(t *testing.T) {
	parallel(t)
	e := setup(t)
	installMetricsUnits(e)
	e.Configure(e.poolConfig("scraped", "min_workers = 2\nmax_workers = 2\ndrain_timeout_sec = 3\n"))
	e.StartDaemon()
	e.waitWorkers("scraped", 2, 15*time.Second)
	e.Enqueue(7, 10*time.Minute) // some run, the rest wait: the counts hold still

	// Through the socket, as Prometheus will see it.
	body := e.Sh(fmt.Sprintf("curl -sf http://127.0.0.1:%d/metrics", metricsPort))
	for _, want := range []string{"flexiq_scaled_workers_current{pool=\"scraped\"}", "flexiq_scaled_build_info{",
		"go_goroutines", "flexiq_scaled_dbus_reconnects_total", "container_cpu_usage_seconds_total{pool=\"scraped\",slot=\""} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	prom := startPrometheus(e, fmt.Sprintf("127.0.0.1:%d", metricsPort))
	status := func() string { return e.UnitProp(daemonUnit, "StatusText") }
	e.Eventually(30*time.Second, "Prometheus agreeing with STATUS=", func() (bool, string) {
		st := status()
		cur, ok1 := promQuery(e, prom, `flexiq_scaled_workers_current{pool="scraped"}`)
		max, ok2 := promQuery(e, prom, `flexiq_scaled_workers_max{pool="scraped"}`)
		pend, ok3 := promQuery(e, prom, `flexiq_scaled_queue_pending{pool="scraped"}`)
		want := fmt.Sprintf("scraped %d/%d workers, %d pending", int(cur), int(max), int(pend))
		return ok1 && ok2 && ok3 && strings.Contains(st, want), fmt.Sprintf("STATUS=%q, Prometheus: %q", st, want)
	})
	for q, want := range map[string]float64{
		`flexiq_scaled_workers_min{pool="scraped"}`:                   2,
		`flexiq_scaled_pool_mode{pool="scraped",mode="active"}`:       1,
		`count(container_cpu_usage_seconds_total{pool="scraped"})`:    2,
		`sum(flexiq_scaled_worker_starts_total{pool="scraped"}) >= 2`: 2,
		`flexiq_scaled_dbus_reconnects_total`:                         0,
	} {
		if got, ok := promQuery(e, prom, q); !ok || got != want {
			t.Errorf("%s = %v (%v), want %v", q, got, ok, want)
		}
	}
	// The operator's view, status --json, says what Prometheus says; a pin
	// shows in both.
	statusJSON := func() (live, max int, pending int64, mode string) {
		var s api.StatusResponse
		out := e.Sh("flexiq-scaled status scraped --json")
		if err := json.Unmarshal([]byte(out), &s); err != nil || len(s.Pools) != 1 || s.Pools[0].Queue == nil {
			e.Fatalf("status scraped --json: %v\n%s", err, out)
		}
		v := s.Pools[0]
		return v.Workers.Live, v.Workers.Max, v.Queue.Pending, v.Mode
	}
	agree := func(wantMode string) {
		e.Eventually(30*time.Second, "Prometheus agreeing with status --json in mode "+wantMode, func() (bool, string) {
			live, max, pending, mode := statusJSON()
			cur, ok1 := promQuery(e, prom, `flexiq_scaled_workers_current{pool="scraped"}`)
			pmax, ok2 := promQuery(e, prom, `flexiq_scaled_workers_max{pool="scraped"}`)
			pend, ok3 := promQuery(e, prom, `flexiq_scaled_queue_pending{pool="scraped"}`)
			pmode, ok4 := promQuery(e, prom, `flexiq_scaled_pool_mode{pool="scraped",mode="`+wantMode+`"}`)
			ok := ok1 && ok2 && ok3 && ok4 && mode == wantMode && pmode == 1 &&
				int(cur) == live && int(pmax) == max && int64(pend) == pending
			return ok, fmt.Sprintf("status --json: %d/%d workers, %d pending, mode %s; Prometheus: %v/%v, %v pending, mode %s = %v",
				live, max, pending, mode, cur, pmax, pend, wantMode, pmode)
		})
	}
	agree("active")
	e.Sh("flexiq-scaled pin scraped 2")
	agree("pinned")

	if n, ok := promQuery(e, prom, `flexiq_scaled_tick_duration_seconds_count{pool="scraped"}`); !ok || n < 1 {
		t.Errorf("tick duration histogram: %v ticks (%v)", n, ok)
	}
	// The proxy runs as a dynamic user in a network of its own.
	if u := e.UnitProp("flexiq-scaled-metrics.service", "DynamicUser"); u != "yes" {
		t.Errorf("proxy DynamicUser=%s", u)
	}
}
