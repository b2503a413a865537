package services

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/test/servers"
)

// Issue 29: a service pool idling at zero replicas is woken by a request at
// its wake address, which nginx sends to while the pool has no ready
// replica; the request is held and forwarded to the first ready replica.

// wakeUpstream points nginx at the wake address while no replica is ready.
const wakeUpstream = `upstream flexiq_web {
{{- range .Leaders}}
	server {{.HostPort "http"}};
{{- else}}
	server {{.Wake}};
{{- end}}
}
`

// wakeSite is nginxSite with a read timeout above hold_timeout_sec: nginx
// must wait for a held request as long as the holder may hold it.
const wakeSite = `include /run/flexiq-scaled/discovery/web-upstream.conf;
server {
	listen 127.0.0.1:8080;
	location / {
		proxy_pass http://flexiq_web;
		proxy_next_upstream off;
		proxy_read_timeout 90s;
	}
}
`

const wakeAddr = "127.0.0.1:18080"

// wakePool is a pool "web" at min_workers 0 whose replicas take readyAfter
// to become ready, with a wake address; holdSec bounds each wake-up's hold
// of the pool at one replica, and so how soon it goes back to zero.
func wakePool(readyAfter time.Duration, mode string, holdSec float64) string {
	return fmt.Sprintf(`
[pools.web]
exec = ["/usr/local/bin/flexiq-testservice", "-ready-after", "%s"]
min_workers = 0
max_workers = 4
poll_interval_sec = 1
scale_down_window_sec = 0
# Idle replicas go: the CPU signal alone would keep one (it rounds up).
policy = "rules"

[[pools.web.scale_up]]
when = "worker_cpu > 0.9"

[pools.web.scale_down]
when = "worker_cpu < 0.5"

[pools.web.service]
drain_period_sec = 1

[pools.web.service.ports]
http = "auto"

[pools.web.service.wake]
listen = "%s"
mode = "%s"
hold_timeout_sec = %g
`, readyAfter, wakeAddr, mode, holdSec) + behindNginx
}

// fastCycles makes a wake pool's way back to zero shorter: a tick and a
// drain period of 0.5 s rather than 1 s.
func fastCycles(pool string) string {
	return strings.NewReplacer("poll_interval_sec = 1\n", "poll_interval_sec = 0.5\n",
		"drain_period_sec = 1\n", "drain_period_sec = 0.5\n").Replace(pool)
}

// bootWake starts the daemon with pool, nginx in front, and waits for the
// wake socket and the upstream pointing at it.
func bootWake(t *testing.T, pool string) *env {
	e := boot(t)
	e.configure(pool, map[string]string{
		"/etc/flexiq-scaled/web-upstream.tmpl":    wakeUpstream,
		"/usr/local/bin/flexiq-test-reload-nginx": reloadScript,
	})
	e.Sh("chmod 0755 /usr/local/bin/flexiq-test-reload-nginx")
	e.StartDaemon()
	e.waitAtZero()
	e.startNginx(wakeSite)
	return e
}

// waitAtZero waits until the pool has no worker, the wake socket listens
// and nginx's upstream points at the wake address.
func (e *env) waitAtZero() {
	e.T.Helper()
	e.waitAtZeroIn("/run/flexiq-scaled/discovery/web-upstream.conf", "server "+wakeAddr+";")
}

// waitAtZeroIn is waitAtZero for the rendered file upstream, which says
// want while the pool is at zero.
func (e *env) waitAtZeroIn(upstream, want string) {
	e.T.Helper()
	e.Eventually(60*time.Second, "pool web at zero, upstream at the wake address", func() (bool, string) {
		up, _ := e.Try("cat", upstream)
		sock, _ := e.Try("systemctl", "is-active", "flexiq-web-wake.socket")
		ws := e.Workers("web")
		return strings.Contains(up, want) && strings.TrimSpace(sock) == "active" && len(ws) == 0,
			fmt.Sprintf("socket %s, workers %v, upstream %q", strings.TrimSpace(sock), ws, up)
	})
}

// TestWakeColdRequestHeld is the first Done-when: a single request
// through nginx at zero replicas, whose replica takes 1.5 s to become
// ready, is held and answered 200. Without the feature nothing listens at
// the wake address, and nginx answers 502.
func TestWakeColdRequestHeld(t *testing.T) {
	const readyAfter = 1500 * time.Millisecond
	e := bootWake(t, wakePool(readyAfter, "hold", 5))
	// The daemon starts the wake process while the pool is at zero: the
	// first connection does not wait for its start.
	e.Eventually(10*time.Second, "the wake process running ahead of a connection", func() (bool, string) {
		st, _ := e.Try("systemctl", "is-active", "flexiq-web-wake.service")
		return strings.TrimSpace(st) == "active", st
	})
	// It relays anyone's connections: a dynamic user, not root, which
	// control.sock knows by its cgroup (it woke the pool below).
	uid, _ := strconv.Atoi(strings.TrimSpace(e.Sh(`awk '/^Uid:/ {print $2}' /proc/$(systemctl show -P MainPID flexiq-web-wake.service)/status`)))
	if uid < 61184 || uid > 65519 {
		e.Errorf("the wake process runs as uid %d, want a dynamic user (61184–65519)", uid)
	}
	code, start, end := e.timedGet("/cold")
	if code != 200 {
		e.Fatalf("the cold request was answered %d, want 200", code)
	}
	ws := e.Workers("web")
	if len(ws) == 0 {
		e.Fatalf("answered 200 with no replica")
	}
	unitStart, itsReady := e.ownStartToReady(ws[0], start)
	cold := end.Sub(start)
	// The overhead is the cold latency less the replica's own start to
	// ready, as measured (the figure); against the -ready-after
	// it was given, it also counts the replica's own process start.
	e.figure("wake-cold", "latency", cold.Round(time.Millisecond),
		"replica_own_start_to_ready", itsReady.Sub(unitStart).Round(time.Millisecond),
		"overhead", (cold - itsReady.Sub(unitStart)).Round(time.Millisecond),
		"ready_after", readyAfter,
		"overhead_over_ready_after", (cold - readyAfter).Round(time.Millisecond))
	// Where the overhead goes, from systemd's and the journal's times: the
	// wake process's start (socket activation), the daemon's wake request
	// and decision, the replica's start, its admission (the probe's ready).
	// The wake process runs before the request (the daemon starts it while
	// the pool is at zero): a negative figure.
	wakeStart := e.mainStart("flexiq-web-wake.service")
	kv := []any{"wake_process_to_request", start.Sub(wakeStart).Round(time.Millisecond)}
	for _, st := range e.wakeStages(start, end, ws[0]) {
		kv = append(kv, st.name, st.took.Round(time.Millisecond))
	}
	e.figure("wake-cold-breakdown", kv...)
	// The journal's wake-up entry, from the wake process.
	e.Eventually(10*time.Second, "the wake-up's journal entry", func() (bool, string) {
		out, _ := e.Try("journalctl", "-o", "verbose", "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b2a")
		return strings.Contains(out, "FLEXIQ_HELD=1") && strings.Contains(out, "FLEXIQ_TIME_TO_READY_SEC="), out
	})
	// explain names the wake as the reason for the scale-up.
	if out := e.CLI("explain", "web", "--last", "20"); !strings.Contains(out, "wake") {
		e.Errorf("explain does not name the wake:\n%s", out)
	}
}

// TestWakeEveryTime is the second Done-when: 30 cycles of zero →
// one request → back to zero, every request answered 200.
//
// The replica is ready 0.5 s after its start, the hold is 1 s (it bounds
// a held connection too, so it must outlast the start), and the tick and
// the drain period are 0.5 s, so that a cycle takes some 2.5 s rather
// than the 3.4 s of 1 s ones; the overhead is measured as the cold
// test's is.
func TestWakeEveryTime(t *testing.T) {
	const readyAfter = 500 * time.Millisecond
	e := bootWake(t, fastCycles(wakePool(readyAfter, "hold", 1)))
	const cycles = 30
	var codes []int
	var lat, over []time.Duration
	stages := map[string][]time.Duration{}
	var names []string
	for i := range cycles {
		if i > 0 {
			e.waitAtZero()
		}
		code, start, end := e.timedGet(fmt.Sprintf("/cycle-%d", i))
		codes = append(codes, code)
		lat = append(lat, end.Sub(start))
		if ws := e.Workers("web"); code == 200 && len(ws) > 0 {
			sts := e.wakeStages(start, end, ws[0])
			over = append(over, end.Sub(start)-sts[3].took)
			for _, st := range sts {
				if _, seen := stages[st.name]; !seen {
					names = append(names, st.name)
				}
				stages[st.name] = append(stages[st.name], st.took)
			}
		}
	}
	ok := 0
	for _, c := range codes {
		if c == 200 {
			ok++
		}
	}
	slices.Sort(lat)
	slices.Sort(over)
	if len(over) == 0 {
		e.Fatalf("no cycle answered 200: %v", codes)
	}
	// Each cold latency less the replica's own start to ready, as
	// measured; and less the -ready-after it was given.
	e.figure("wake-every-time", "cycles", cycles, "ok", ok, "median", lat[len(lat)/2].Round(time.Millisecond), "max", lat[len(lat)-1].Round(time.Millisecond),
		"overhead_median", over[len(over)/2].Round(time.Millisecond), "overhead_max", over[len(over)-1].Round(time.Millisecond),
		"over_ready_after_median", (lat[len(lat)/2] - readyAfter).Round(time.Millisecond))
	var kv []any
	for _, n := range names {
		d := stages[n]
		slices.Sort(d)
		kv = append(kv, n, d[len(d)/2].Round(time.Millisecond))
	}
	e.figure("wake-every-time-stages-median", kv...)
	if ok != cycles {
		e.Errorf("%d of %d cold requests answered 200: %v", ok, cycles, codes)
	}
}

// TestWakeRejectMode: with mode = "reject", a request at zero is answered
// 503 with Retry-After at once, the pool wakes, and a retry after the cold
// start is answered 200.
func TestWakeRejectMode(t *testing.T) {
	t.Parallel() // measures nothing: beside the others that do not (package doc)
	e := bootWake(t, wakePool(1500*time.Millisecond, "reject", 10))
	out := e.Sh(`curl -s -D - -o /dev/null -w 'took=%{time_total}\n' --max-time 30 http://127.0.0.1:8080/reject || true`)
	if !strings.Contains(out, " 503") || !strings.Contains(strings.ToLower(out), "retry-after:") {
		e.Fatalf("a request at zero in reject mode: want 503 with Retry-After, got:\n%s", out)
	}
	e.waitDiscovered("web", 1, 30*time.Second)
	e.Eventually(20*time.Second, "a retry answered 200", func() (bool, string) {
		code, _, _ := e.timedGet("/retry")
		return code == 200, fmt.Sprint(code)
	})
}

// burst sends n requests at once through nginx and returns the count of
// each status (000: no answer).
func (e *env) burst(n int, path string) map[string]int {
	e.T.Helper()
	out := e.Sh(fmt.Sprintf(`seq %d | xargs -P %d -I{} curl -s -o /dev/null -w '%%{http_code}\n' --max-time 100 http://127.0.0.1:8080%s{} || true`, n, n, path))
	codes := map[string]int{}
	for _, c := range strings.Fields(out) {
		codes[c]++
	}
	return codes
}

// TestWakeBurst is the burst at zero: 200 concurrent requests
// through nginx, all held and then answered 200, none refused; and the
// pool then scales to what its rules ask once the replicas export
// metrics: each request takes 8 s, so some 200 are in flight on the first
// replica, and the rule on the in-flight gauge that Prometheus scrapes
// through the file_sd file asks for more replicas than the wake's one.
func TestWakeBurst(t *testing.T) {
	cfg := wakePool(1500*time.Millisecond, "hold", 10)
	for _, r := range [][2]string{
		{`"-ready-after", "1.5s"]`, `"-ready-after", "1.5s", "-latency", "8s"]`},
		{`when = "worker_cpu > 0.9"`, "when = 'promql(\"sum(flexiq_testservice_requests_in_flight{flexiq_pool=\\\"web\\\"}) >= bool 5\")'\ncooldown_sec = 1"},
		{`when = "worker_cpu < 0.5"`, "when = 'promql(\"sum(flexiq_testservice_requests_in_flight{flexiq_pool=\\\"web\\\"}) < bool 1\")'"},
		{"[pools.web.service]\n", "[pools.web.service]\nmetrics_port = \"http\"\n"},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("the wake pool's config has no %q", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	e := bootWake(t, "\n[prometheus]\nurl = \"http://127.0.0.1:9090\"\nscrape_interval_sec = 1\n"+cfg)
	servers.Prometheus(t, e.SB, `  - job_name: flexiq-web
    file_sd_configs:
      - files: ["/run/flexiq-scaled/discovery/web.file_sd.json"]
        refresh_interval: 1s
`, time.Second)
	start := time.Now()
	done := make(chan map[string]int, 1)
	go func() { done <- e.burst(200, "/burst-") }()
	// While the burst's requests are in flight: more than the wake's one
	// replica, as the rule asks (a generous bound, not a timing).
	most := 0
	e.Eventually(90*time.Second, "the pool scaled past one replica on its rule", func() (bool, string) {
		most = max(most, len(e.Workers("web")))
		return most >= 2, fmt.Sprintf("%d workers at most", most)
	})
	codes := <-done
	e.figure("wake-burst", "requests", 200, "ok", codes["200"], "took", time.Since(start).Round(time.Millisecond), "codes", fmt.Sprint(codes),
		"workers_reached", most)
	if codes["200"] != 200 {
		e.Errorf("a burst of 200 at zero: %v, want 200 answered 200", codes)
	}
}

// TestWakeHeldAcrossRestart: systemctl restart flexiq-scaled while
// connections are held, and while it is down, loses none of them: systemd
// holds the socket, the wake process rides the restart out, and the
// replica, left running, is adopted and serves them.
func TestWakeHeldAcrossRestart(t *testing.T) {
	t.Parallel() // measures nothing: beside the others that do not (package doc)
	e := bootWake(t, wakePool(3*time.Second, "hold", 30))
	e.Sh(`for i in 1 2 3 4 5; do (curl -s -o /dev/null -w '%{http_code}\n' --max-time 100 http://127.0.0.1:8080/before-$i >>/run/wake-codes; true) & done; sleep 0.5
systemctl restart flexiq-scaled.service &
sleep 0.05
for i in 1 2 3 4 5; do (curl -s -o /dev/null -w '%{http_code}\n' --max-time 100 http://127.0.0.1:8080/during-$i >>/run/wake-codes; true) & done
wait`)
	out := e.Sh("cat /run/wake-codes")
	codes := map[string]int{}
	for _, c := range strings.Fields(out) {
		codes[c]++
	}
	e.figure("wake-restart", "requests", 10, "ok", codes["200"], "codes", fmt.Sprint(codes))
	if codes["200"] != 10 {
		e.Errorf("held across a restart: %v, want 10 answered 200", codes)
	}
	// The restarted daemon adopted the socket rather than making another.
	if n := strings.Count(e.JournalText("-u", "flexiq-scaled"), "flexiq-web-wake.socket listening"); n != 1 {
		e.Errorf("the wake socket was started %d times, want once (adopted after the restart)", n)
	}
}

// TestWakeNoCostWhenAwake: once a replica is ready, nothing of the wake
// path stays in the data path: 150 requests/s for 30 s reach the replica,
// none the wake address (the wake process's own count of the connections
// it accepted stays at the cold one), and the wake process exits after its
// idle time, which runs meanwhile. Back at zero, the daemon starts it
// again, ahead of a connection.
func TestWakeNoCostWhenAwake(t *testing.T) {
	// The hold (120 s) keeps the replica through the test.
	e := bootWake(t, wakePool(1500*time.Millisecond, "hold", 120))
	if code, _, _ := e.timedGet("/first"); code != 200 {
		e.Fatalf("the cold request: %d", code)
	}
	// Until the publish that follows the replica's admission has reloaded
	// nginx, requests still take the wake address (and are forwarded): the
	// count starts once nginx points at the replica, and the wake
	// process's report (each second while it changes) has settled.
	e.Eventually(20*time.Second, "nginx's upstream at the replica", func() (bool, string) {
		up, _ := e.Try("cat", "/run/flexiq-scaled/discovery/web-upstream.conf")
		return !strings.Contains(up, wakeAddr), up
	})
	var before api.WakeStats
	e.Eventually(20*time.Second, "the wake process's count settled", func() (bool, string) {
		a := e.wakeStats()
		time.Sleep(1500 * time.Millisecond)
		before = e.wakeStats()
		return a == before && before.Held == 0 && before.Forwarding == 0, fmt.Sprintf("%+v then %+v", a, before)
	})
	started := e.UnitProp("flexiq-web-wake.service", "ExecMainStartTimestampMonotonic")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := e.loadgen(ctx, "http://127.0.0.1:8080/", 150, 30*time.Second)
	if err != nil {
		e.Fatalf("%v", err)
	}
	// Its idle time (30 s) began with the cold request's end: it is gone
	// about as the load ends, and its last report is the daemon's.
	e.Eventually(60*time.Second, "the wake process gone idle", func() (bool, string) {
		st, _ := e.Try("systemctl", "is-active", "flexiq-web-wake.service")
		return strings.TrimSpace(st) == "inactive", st
	})
	// Its last report, sent as it exits, is the daemon's: the same
	// process's count (no connection started another).
	if again := e.UnitProp("flexiq-web-wake.service", "ExecMainStartTimestampMonotonic"); again != started {
		e.Errorf("the wake process started again during the load (%s, then %s): requests went its way while a replica was ready", started, again)
	}
	wake := e.wakeStats()
	e.figure("wake-awake", "sent", r.Sent, "failed", r.Failed(), "through_wake_address", wake.Accepted-before.Accepted, "p99", r.P99)
	if r.Failed() != 0 {
		e.Errorf("awake, %d of %d requests failed: %s", r.Failed(), r.Sent, r)
	}
	if wake.Accepted != before.Accepted || before.Accepted == 0 {
		e.Errorf("the wake address accepted %d connections during the load (%d before it, %d after): requests went its way while a replica was ready",
			wake.Accepted-before.Accepted, before.Accepted, wake.Accepted)
	}
	// Back at zero (the operator's pin wins over the wake's hold), the
	// daemon starts the wake process again ahead of the next connection.
	e.CLI("pin", "web", "0")
	e.waitAtZero()
	e.Eventually(10*time.Second, "the wake process started again at zero", func() (bool, string) {
		st, _ := e.Try("systemctl", "is-active", "flexiq-web-wake.service")
		return strings.TrimSpace(st) == "active", st
	})
}

// haproxyBackend is docs/services.md's HAProxy backend: the wake address
// while no replica is ready, no keepalive to it.
const haproxyBackend = `backend web
	option http-server-close
	timeout server 90s
{{- range .Leaders}}
	server web{{.Slot}} {{.HostPort "http"}}
{{- else}}
	server wake {{.Wake}}
{{- end}}
`

// haproxyMain is the rest of HAProxy's configuration; Debian's unit loads
// both files through CONFIG (/etc/default/haproxy).
const haproxyMain = `global
	pidfile /run/haproxy.pid
defaults
	mode http
	timeout connect 5s
	timeout client 100s
	timeout server 90s
frontend web
	bind 127.0.0.1:8080
	default_backend web
`

// TestWakeHAProxy: the same wake path behind Debian's HAProxy: 5 cycles of
// zero → one request → zero, all answered 200.
func TestWakeHAProxy(t *testing.T) {
	t.Parallel() // measures nothing: beside the others that do not (package doc)
	const backend = "/run/flexiq-scaled/discovery/web-backend.cfg"
	pool := strings.NewReplacer(
		"/etc/flexiq-scaled/web-upstream.tmpl", "/etc/flexiq-scaled/web-backend.tmpl",
		"/run/flexiq-scaled/discovery/web-upstream.conf", backend,
		"/usr/local/bin/flexiq-test-reload-nginx", "/usr/local/bin/flexiq-test-reload-haproxy",
	).Replace(fastCycles(wakePool(500*time.Millisecond, "hold", 1)))
	e := boot(t)
	e.configure(pool, map[string]string{
		"/etc/flexiq-scaled/web-backend.tmpl":       haproxyBackend,
		"/usr/local/bin/flexiq-test-reload-haproxy": "#!/bin/sh\n/usr/bin/systemctl reload haproxy.service\n",
		"/etc/haproxy/flexiq-test.cfg":              haproxyMain,
		"/etc/default/haproxy":                      "CONFIG=\"/etc/haproxy/flexiq-test.cfg -f " + backend + "\"\n",
	})
	e.Sh("chmod 0755 /usr/local/bin/flexiq-test-reload-haproxy")
	e.StartDaemon()
	e.waitAtZeroIn(backend, "server wake "+wakeAddr)
	// Debian starts HAProxy at boot, on its own file: again, on ours.
	e.Sh("systemctl restart haproxy.service")
	const cycles = 5
	var codes []int
	for i := range cycles {
		if i > 0 {
			e.waitAtZeroIn(backend, "server wake "+wakeAddr)
		}
		code, _, _ := e.timedGet(fmt.Sprintf("/haproxy-%d", i))
		codes = append(codes, code)
	}
	for _, c := range codes {
		if c != 200 {
			e.Errorf("through HAProxy at zero: %v, want %d answered 200", codes, cycles)
			break
		}
	}
}
