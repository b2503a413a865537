package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The daemon's unit allows IPv4 and IPv6 (and no private network), so that
// a network source works out of the box: on localhost (TestPrometheusSource)
// and on another address, here. The other address is one end of a veth pair
// that the test makes inside the sandbox, between the sandbox's own network
// namespace (where the daemon runs) and a namespace of its own holding the
// server: 10.231.0.1/30 <-> 10.231.0.2/30. None of it exists outside the
// sandbox, and no traffic leaves it.
const (
	remoteNetns = "flexiq-remote"
	localAddr   = "10.231.0.1"
	remoteAddr  = "10.231.0.2"
)

// remoteNetwork makes the namespace and the veth pair, and removes them when
// the test ends.
func remoteNetwork(e *env) {
	e.T.Helper()
	e.Sh(`ip netns del ` + remoteNetns + ` 2>/dev/null || true; ip link del flexiq-v0 2>/dev/null || true
set -e
ip netns add ` + remoteNetns + `
ip link add flexiq-v0 type veth peer name flexiq-v1
ip link set flexiq-v1 netns ` + remoteNetns + `
ip addr add ` + localAddr + `/30 dev flexiq-v0
ip link set flexiq-v0 up
ip netns exec ` + remoteNetns + ` ip addr add ` + remoteAddr + `/30 dev flexiq-v1
ip netns exec ` + remoteNetns + ` ip link set flexiq-v1 up
ip netns exec ` + remoteNetns + ` ip link set lo up`)
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e.SB.Exec(ctx, "sh", "-c", "ip netns del "+remoteNetns+"; ip link del flexiq-v0 2>/dev/null; true")
	})
}

// remotePrometheus runs Debian's prometheus binary in the remote namespace,
// listening on remoteAddr only, scraping scrape every second.
func remotePrometheus(e *env, scrape string) string {
	e.T.Helper()
	const unit, dir = "flexiq-remote-prometheus", "/var/lib/flexiq-remote-prometheus"
	e.Sh("rm -rf " + dir + " && mkdir -p " + dir)
	e.Write(dir+"/prometheus.yml", "global:\n  scrape_interval: 1s\nscrape_configs:\n"+scrape)
	e.Sh(fmt.Sprintf(`systemctl stop %[1]s 2>/dev/null || true; systemctl reset-failed %[1]s 2>/dev/null || true
systemd-run --quiet --unit %[1]s -p NetworkNamespacePath=/run/netns/%[2]s /usr/bin/prometheus \
  --config.file=%[3]s/prometheus.yml --storage.tsdb.path=%[3]s/data --web.listen-address=%[4]s:9090`, unit, remoteNetns, dir, remoteAddr))
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e.SB.Exec(ctx, "systemctl", "stop", unit)
	})
	url := "http://" + remoteAddr + ":9090"
	e.Eventually(60*time.Second, "the remote Prometheus ready", func() (bool, string) {
		out, err := e.SB.Exec(e.Ctx(), "curl", "-sf", url+"/-/ready")
		return err == nil, fmt.Sprintf("%v %s", err, out)
	})
	return url
}

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)

// exposure is systemd-analyze security's overall figure for the daemon's
// unit as loaded.
func (e *env) exposure() string {
	e.T.Helper()
	out := e.Sh("systemd-analyze security --no-pager " + daemonUnit)
	m := exposureRE.FindStringSubmatch(out)
	if m == nil {
		e.T.Fatalf("no exposure level in systemd-analyze security's output:\n%s", out)
	}
	return m[1]
}

// The unit's exposure without the network (as it was: PrivateNetwork=yes,
// AF_UNIX only, IPAddressDeny=any) and as shipped, with IPv4 and IPv6.
func TestUnitNetworkExposure(t *testing.T) {
	parallel(t)
	e := setup(t)
	const dropIn = "/etc/systemd/system/flexiq-scaled.service.d/90-no-network.conf"
	e.Write(dropIn, "[Service]\nPrivateNetwork=yes\nRestrictAddressFamilies=\nRestrictAddressFamilies=AF_UNIX\nIPAddressDeny=any\n")
	e.Sh("systemctl daemon-reload")
	before := e.exposure()
	e.Sh("rm " + dropIn + " && systemctl daemon-reload")
	after := e.exposure()
	t.Logf("systemd-analyze security %s: %s without the network, %s as shipped", daemonUnit, before, after)
	if before != "1.3" || after != "2.2" {
		t.Errorf("exposure %s before, %s after; the unit's comments and docs/sources/README.md say 1.3 and 2.2", before, after)
	}
	if p := e.UnitProp(daemonUnit, "PrivateNetwork"); p != "no" {
		t.Errorf("PrivateNetwork=%s as shipped", p)
	}
}

// A Prometheus on another address, in a network namespace of its own,
// scraping an exporter there: the daemon, in its unit's sandbox, reads it
// and sizes the pool from it. So does a command source, which runs in the
// same sandbox.
func TestPrometheusOnAnotherAddress(t *testing.T) {
	parallel(t)
	e := setup(t)
	remoteNetwork(e)
	// Nothing is reachable there from the namespace's own view of the
	// world but itself and the veth's other end.
	x := startExporter(e, "flexiq-remote-exporter", "127.0.0.1", 9101, remoteNetns)
	x.set(gauges(0, 0))
	prom := remotePrometheus(e, scrapeJob("queue", "127.0.0.1:9101"))
	// Debian's prometheus.service, which the sandbox boots, would answer on
	// the sandbox's own loopback.
	e.Sh("systemctl stop prometheus.service")
	if out, err := e.SB.Exec(e.Ctx(), "curl", "-sf", "--max-time", "2", "http://127.0.0.1:9090/-/ready"); err == nil {
		t.Fatalf("a Prometheus answers on the sandbox's loopback too, so the test would prove nothing: %s", out)
	}
	e.Write("/usr/local/bin/flexiq-e2e-remote-depth", `#!/bin/sh
# A command source that reads the remote Prometheus itself.
set -e
v=$(curl -sf --max-time 2 'http://`+remoteAddr+`:9090/api/v1/query?query=sum(queue_waiting)' | sed -n 's/.*"value":\[[0-9.]*,"\([0-9]*\)".*/\1/p')
echo "{\"pending\": ${v:-0}, \"running\": 0}"
`)
	e.Sh("chmod 0755 /usr/local/bin/flexiq-e2e-remote-depth")
	cmdPool := strings.NewReplacer(`type = "prometheus"`, `type = "command"`,
		`url = "`+prom+`"`, `command = ["/usr/local/bin/flexiq-e2e-remote-depth"]`,
		`pending_query = "sum(queue_waiting)"`, "", `running_query = "sum(queue_running)"`, "").Replace(promPool("viacmd", prom, ""))
	e.Configure(promPool("remote", prom, "") + cmdPool)
	e.StartDaemon()

	x.set(gauges(4, 0))
	e.waitWorkers("remote", 2, 30*time.Second)
	e.waitWorkers("viacmd", 2, 15*time.Second)
	x.set(gauges(0, 0))
	e.waitWorkers("remote", 0, 30*time.Second)
	e.waitWorkers("viacmd", 0, 15*time.Second)
	for _, pool := range []string{"remote", "viacmd"} {
		if errs := e.sourceErrors(pool); len(errs) != 0 {
			t.Errorf("pool %s: source errors %q", pool, errs)
		}
	}
}
