package services

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/servers"
)

// TestPrometheusScrapesAndScales: Debian's Prometheus finds the replicas
// through the pool's file_sd file (one target per ready replica, labelled
// with the pool and slot), and a pool with no queue source scales up and
// back down on a PromQL rule over the replicas' own in-flight gauge.
func TestPrometheusScrapesAndScales(t *testing.T) {
	t.Parallel() // measures nothing: beside the restart test (package doc)
	e := boot(t)
	servers.Prometheus(t, e.SB, `  - job_name: flexiq-web
    file_sd_configs:
      - files: ["/run/flexiq-scaled/discovery/web.file_sd.json"]
        refresh_interval: 1s
`, time.Second)
	e.configure(`
[prometheus]
url = "http://127.0.0.1:9090"
scrape_interval_sec = 1

[pools.web]
exec = ["/usr/local/bin/flexiq-testservice", "-latency", "1s"]
min_workers = 1
max_workers = 3
poll_interval_sec = 1
policy = "rules"

[[pools.web.scale_up]]
when = 'promql("sum(flexiq_testservice_requests_in_flight{flexiq_pool=\"web\"}) >= bool 5")'
cooldown_sec = 5

[pools.web.scale_down]
when = 'promql("sum(flexiq_testservice_requests_in_flight{flexiq_pool=\"web\"}) < bool 1")'
cooldown_sec = 5

[pools.web.service]
metrics_port = "http"
drain_period_sec = 1

[pools.web.service.ports]
http = "auto"

[pools.web.service.readiness]
type = "http"
path = "/health"
port = "http"
period_sec = 1
`, nil)
	e.StartDaemon()
	e.waitDiscovered("web", 1, 30*time.Second)
	e.waitTargets(1, time.Minute)

	// 10 requests a second that each take 1 s: some 10 in flight, 5 per
	// replica or more until there are 3.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.loadgen(ctx, "http://"+e.firstReplica("web")+"/", 10, 40*time.Second)
		done <- err
	}()
	e.waitDiscovered("web", 2, time.Minute)
	e.waitTargets(2, time.Minute)
	cancel()
	<-done
	e.Eventually(2*time.Minute, "the pool back at 1 replica once the load ended", func() (bool, string) {
		rs, _ := e.discovered("web")
		return len(rs) == 1, fmt.Sprintf("%d replicas", len(rs))
	})
	e.waitTargets(1, time.Minute)
}

// firstReplica is the HOST:PORT of the pool's first ready replica.
func (e *env) firstReplica(pool string) string {
	e.T.Helper()
	rs := e.waitDiscovered(pool, 1, 30*time.Second)
	return fmt.Sprintf("%s:%d", rs[0].Address, rs[0].Ports["http"])
}

// waitTargets waits until Prometheus has exactly the discovery file's
// replicas as its active targets of job flexiq-web, each with its pool and
// slot labels, and up.
func (e *env) waitTargets(n int, within time.Duration) {
	e.T.Helper()
	e.Eventually(within, fmt.Sprintf("%d Prometheus targets", n), func() (bool, string) {
		out, err := e.Try("curl", "-sf", "http://127.0.0.1:9090/api/v1/targets?state=active")
		if err != nil {
			return false, err.Error()
		}
		var resp struct {
			Data struct {
				ActiveTargets []struct {
					Labels map[string]string `json:"labels"`
					Health string            `json:"health"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			return false, err.Error()
		}
		rs, _ := e.discovered("web")
		var want, got []string
		for _, r := range rs {
			want = append(want, fmt.Sprintf("%s:%d web %d up", r.Address, r.Ports["http"], r.Slot))
		}
		for _, t := range resp.Data.ActiveTargets {
			if t.Labels["job"] == "flexiq-web" {
				got = append(got, fmt.Sprintf("%s %s %s %s", t.Labels["instance"], t.Labels["flexiq_pool"], t.Labels["flexiq_slot"], t.Health))
			}
		}
		sort.Strings(want)
		sort.Strings(got)
		w, g := strings.Join(want, ", "), strings.Join(got, ", ")
		return len(rs) == n && w == g, "targets [" + g + "], discovery [" + w + "]"
	})
}
