package fleet

import (
	"fmt"
	"strings"
)

// The pools' settings, the same on every host. Workers sleep and consume
// nothing, so the backlog, and with it the fleet's target, stay where the
// burst put them: ceil(burstJobs / depthPerWorker) = 20, between
// minWorkers and maxWorkers, and above what the hosts hold (26) once a
// host of 10 is lost (16).
const (
	minWorkers     = 2
	maxWorkers     = 40
	depthPerWorker = 5
	burstJobs      = 100
	// The fleet timings: short, for a short suite.
	ttl       = 6  // s
	heartbeat = 1  // s: also the leader's decision tick
	renew     = 2  // s
	hold      = 12 // s
)

// pools are the fleet pools every host runs, one per store.
var pools = []struct{ name, store string }{{"bull", "redis"}, {"river", "postgres"}}

// expectedTarget is the single decision for a backlog, computed here from
// the pool's settings rather than read from the daemons: the backlog
// signal ceil(pending / target_queue_depth_per_worker) (no job runs, and
// the other signals are off), within min_workers and max_workers.
func expectedTarget(backlog int) int {
	n := (backlog + depthPerWorker - 1) / depthPerWorker
	return min(max(n, minWorkers), maxWorkers)
}

// configTOML is a host's config.toml: both pools, as fleet pools when
// fleet is set (each host with its own capacity), else as plain pools of
// that host alone (the harness's check before the fleet wiring).
func configTOML(c *cluster, h *host, fleet bool) string {
	var b strings.Builder
	if fleet {
		fmt.Fprintf(&b, `[fleet]
url = %q
ttl_sec = %d
heartbeat_sec = %d
renew_sec = %d
hold_sec = %d
`, c.redisURL, ttl, heartbeat, renew, hold)
	}
	for _, p := range pools {
		fmt.Fprintf(&b, `
[pools.%s]
exec = ["/bin/sleep", "infinity"]
min_workers = %d
max_workers = %d
target_queue_depth_per_worker = %d
threads_per_worker = 1
target_utilisation = 1.0
poll_interval_sec = 1
scale_down_window_sec = 2
drain_timeout_sec = 2
`, p.name, minWorkers, maxWorkers, depthPerWorker)
		if p.name == "bull" {
			fmt.Fprintf(&b, `[pools.bull.source]
type = "bullmq"
url = %q
queues = [%q]
`, c.redisURL, queueName)
		} else {
			fmt.Fprintf(&b, `[pools.river.source]
type = "river"
url = %q
password_file = %q
schema = "river"
queues = [%q]
`, c.pgURL, pgPasswordFile, queueName)
		}
		if !fleet {
			continue
		}
		fmt.Fprintf(&b, "[pools.%s.fleet]\ncapacity = %d\n", p.name, h.capacity)
		if p.store == "postgres" {
			fmt.Fprintf(&b, "url = %q\npassword_file = %q\n", c.pgURL, pgPasswordFile)
		}
	}
	return b.String()
}
