package services

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRestartKeepsPortsAndReadiness: ports and readiness survive
// `systemctl restart flexiq-scaled`: the same units with the same ports, no
// replica probed into a false "not ready", no discovery file rewritten.
func TestRestartKeepsPortsAndReadiness(t *testing.T) {
	t.Parallel() // measures nothing: beside the Prometheus test (package doc)
	e := boot(t)
	e.configure(`
[pools.web]
exec = ["/usr/local/bin/flexiq-testservice", "-ready-after", "1s"]
min_workers = 3
max_workers = 4
poll_interval_sec = 1
# A service without a queue scales on its CPU (and here on pins).
target_cpu_utilisation = 0.8

[pools.web.service]
metrics_port = "http"

[pools.web.service.ports]
http = "auto"
admin = 9300

[pools.web.service.readiness]
type = "http"
path = "/health"
port = "http"
period_sec = 1
`, nil)
	e.StartDaemon()
	before := e.waitDiscovered("web", 3, 30*time.Second)
	for _, r := range before {
		if want := 9300 + r.Slot - 1; r.Ports["admin"] != want {
			t.Errorf("slot %d: admin port %d, want the base's %d", r.Slot, r.Ports["admin"], want)
		}
		if r.Ports["http"] == 0 {
			t.Errorf("slot %d: no http port in %+v", r.Slot, r)
		}
		env := e.Sh("systemctl show -p Environment --value " + r.Unit)
		if want := fmt.Sprintf("FLEXIQ_PORT_HTTP=%d", r.Ports["http"]); !strings.Contains(env, want) {
			t.Errorf("%s: environment %q lacks %s", r.Unit, env, want)
		}
	}
	stat := func() string {
		return e.Sh("stat -c '%n %Y %y' /run/flexiq-scaled/discovery/web.json /run/flexiq-scaled/discovery/web.file_sd.json")
	}
	filesBefore, invBefore := stat(), e.invocations(before)

	e.Sh("systemctl restart " + daemonUnit)
	// Several probe periods, so that a re-probe into "not ready" would
	// have shown.
	time.Sleep(6 * time.Second)
	after, err := e.discovered("web")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("discovery after the restart:\n%+v\nbefore:\n%+v", after, before)
	}
	if got := stat(); got != filesBefore {
		t.Errorf("a discovery file was rewritten by the restart:\nbefore %s\nafter  %s", filesBefore, got)
	}
	if got := e.invocations(before); got != invBefore {
		t.Errorf("replicas restarted: invocations before %s, after %s", invBefore, got)
	}
	if j := e.Sh("journalctl --no-pager -u " + daemonUnit + " --since=-6s | grep -iE 'not ready|unready' || true"); strings.TrimSpace(j) != "" {
		t.Errorf("the restarted daemon found replicas not ready:\n%s", j)
	}
}

// invocations are the units' invocation IDs, which change when a unit
// restarts.
func (e *env) invocations(rs []replica) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.Unit + "=" + strings.TrimSpace(e.Sh("systemctl show -p InvocationID --value "+r.Unit)) + " ")
	}
	return b.String()
}
