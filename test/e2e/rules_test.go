package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const ruleErrorID = "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b12"

// rulesPool is a policy = "rules" pool of sleeping workers on the
// Prometheus at url, scraped every second; rules is its rule tables.
func rulesPool(name, url string, min int, rules string) string {
	return fmt.Sprintf(`
[pools.%[1]s]
exec = ["/bin/sleep", "infinity"]
poll_interval_sec = 1
min_workers = %[3]d
max_workers = 4
drain_timeout_sec = 5
policy = "rules"
%[4]s
[pools.%[1]s.source]
type = "prometheus"
url = %[2]q
pending_query = "sum(queue_waiting)"
scrape_interval_sec = 1
`, name, url, min, rules)
}

// A rule over promql(), against Debian's Prometheus scraping a test
// exporter inside the sandbox: it fires while the gauge is high, step by
// step up to max_workers, and the scale-down rule brings the pool back. A
// query that the server refuses holds its pool, and says so.
func TestRulesOverPromQL(t *testing.T) {
	parallel(t)
	e := setup(t)
	x := startExporter(e, "flexiq-e2e-rules-exporter", "127.0.0.1", 9102, "")
	x.set(gauges(0, 0))
	prom := startPrometheus(e, "127.0.0.1:9102")
	e.Configure(rulesPool("rules", prom, 0, `
[[pools.rules.scale_up]]
when = 'promql("max_over_time(queue_waiting[5s]) > 3")'
step = 2
cooldown_sec = 1

[pools.rules.scale_down]
when = 'promql("queue_waiting == bool 0") && workers > 0'
cooldown_sec = 1
`) + rulesPool("broken", prom, 1, `
[[pools.broken.scale_up]]
when = 'promql("no_such_function(queue_waiting) > 3")'
`))
	e.StartDaemon()
	e.waitWorkers("broken", 1, 20*time.Second)
	e.holds("rules", 0, 2*time.Second, "with the gauge at 0")

	x.set(gauges(5, 0))
	e.waitWorkers("rules", 4, 30*time.Second)
	ups := e.Entries("FLEXIQ_POOL=rules", "FLEXIQ_RULE=scale_up[0]", "FLEXIQ_ACTION=scale-up")
	if len(ups) < 2 {
		e.Errorf("%d scale-up decisions naming rule scale_up[0], want two steps of 2", len(ups))
	}
	for _, en := range ups {
		if !strings.Contains(en.Field("MESSAGE"), "rule scale_up[0]") {
			e.Errorf("decision entry does not say which rule fired: %q", en.Field("MESSAGE"))
		}
	}

	x.set(gauges(0, 0))
	e.waitWorkers("rules", 0, 30*time.Second)
	if n := len(e.Entries("FLEXIQ_POOL=rules", "FLEXIQ_RULE=scale_down", "FLEXIQ_ACTION=scale-down")); n == 0 {
		e.Errorf("no scale-down decision naming the scale_down rule")
	}

	// The broken rule's pool held at its minimum through it all, and said
	// why, naming the server's error.
	e.holds("broken", 1, time.Second, "with a query the server refuses")
	e.Eventually(10*time.Second, "a rule-error entry for pool broken", func() (bool, string) {
		for _, en := range e.Entries("FLEXIQ_POOL=broken", ruleErrorID) {
			if strings.Contains(en.Field("FLEXIQ_ERROR"), "no_such_function") && en.Field("FLEXIQ_RULE") == "scale_up[0]" {
				return true, ""
			}
		}
		return false, "none yet"
	})
}
