package services

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/loadgen"
)

// portHeldID is the MESSAGE_ID of a port held by another than its
// replica (internal/eventlog.PortHeld).
const portHeldID = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b28"

// squatPool is a pool of three replicas behind nginx whose replicas bind
// their port only after 4 s (a slow start), which leaves a squatter the
// time to bind it first; a replica that cannot bind stays up, not
// listening, as a server that retries would. Its http port is "auto", or
// fixed from base.
func squatPool(name string, base int) string {
	port := `"auto"`
	if base > 0 {
		port = strconv.Itoa(base)
	}
	return fmt.Sprintf(`
[pools.%[1]s]
exec = ["/bin/sh", "-c", "sleep 4; /usr/local/bin/flexiq-testservice -latency 5ms || exec sleep infinity"]
min_workers = 3
max_workers = 4
poll_interval_sec = 1
target_cpu_utilisation = 0.8

[pools.%[1]s.service]
drain_period_sec = 1
ready_timeout_sec = 12
metrics_port = "http"

[pools.%[1]s.service.ports]
http = %[2]s

[pools.%[1]s.service.readiness]
type = "http"
path = "/health"
port = "http"
period_sec = 1

[[pools.%[1]s.service.template]]
source = "/etc/flexiq-scaled/%[1]s-upstream.tmpl"
destination = "/run/flexiq-scaled/discovery/%[1]s-upstream.conf"
after_change = ["/usr/local/bin/flexiq-test-reload-nginx"]
`, name, port)
}

// squatSite proxies 127.0.0.1:8080 to pool web and 127.0.0.1:8081 to pool
// api, each through its upstream.
const squatSite = `include /run/flexiq-scaled/discovery/web-upstream.conf;
include /run/flexiq-scaled/discovery/api-upstream.conf;
server {
	listen 127.0.0.1:8080;
	location / { proxy_pass http://flexiq_web; proxy_next_upstream off; }
}
server {
	listen 127.0.0.1:8081;
	location / { proxy_pass http://flexiq_api; proxy_next_upstream off; }
}
`

// TestSquattersNeverServe is issue 27's item 1: a local user (nobody)
// who binds a replica's port first, an auto port read from the unit's
// Environment= before the replica binds it, or a fixed port (base + slot)
// before the pool starts, never enters a discovery file, gets no request
// through nginx, and is named in the journal with its uid and PID; the
// pools reach their three ready replicas on other ports. On the code
// before the check, the probes' GET /health reached the squatters, which
// were published and served.
func TestSquattersNeverServe(t *testing.T) {
	e := boot(t)
	const apiBase = 9400
	e.configure(squatPool("web", 0)+squatPool("api", apiBase), map[string]string{
		"/etc/flexiq-scaled/web-upstream.tmpl":    upstreamTemplate,
		"/etc/flexiq-scaled/api-upstream.tmpl":    strings.ReplaceAll(upstreamTemplate, "flexiq_web", "flexiq_api"),
		"/usr/local/bin/flexiq-test-reload-nginx": "#!/bin/sh\n/usr/bin/systemctl reload nginx.service || true\n",
	})
	e.Sh("chmod 0755 /usr/local/bin/flexiq-test-reload-nginx")

	// The fixed port's squatter is there before the pool: slot 1's port.
	apiSquat := e.squat("squat-api", apiBase)

	// Every discovery file, read four times a second from the start: a
	// squatter's port must never be in any of them.
	watch := e.watchDiscovery()
	watch.add(apiBase)
	defer watch.stop()

	e.StartDaemon()
	// The auto port's squatter: web's slot 1 port, read from its unit's
	// Environment= before the replica binds it (4 s after its start).
	var webPort int
	e.Eventually(20*time.Second, "flexiq-web@1's port in its Environment=", func() (bool, string) {
		env, _ := e.Try("systemctl", "show", "-p", "Environment", "--value", "flexiq-web@1.service")
		m := regexp.MustCompile(`FLEXIQ_PORT_HTTP=(\d+)`).FindStringSubmatch(env)
		if m != nil {
			webPort, _ = strconv.Atoi(m[1])
		}
		return webPort > 0, env
	})
	watch.add(webPort)
	webSquat := e.squat("squat-web", webPort)
	t.Logf("squatters: web's auto port %d (PID %d), api's fixed port %d (PID %d)", webPort, webSquat, apiBase, apiSquat)

	// Both pools reach three ready replicas, none on a squatted port;
	// web's slot 1 only once it has been replaced after ready_timeout_sec.
	t0 := time.Now()
	ready := map[string][]replica{}
	for _, pool := range []string{"api", "web"} {
		ready[pool] = e.waitDiscovered(pool, 3, 90*time.Second)
	}
	e.figure("squat-target", "web_ready", len(ready["web"]), "api_ready", len(ready["api"]), "after", time.Since(t0))
	for pool, rs := range ready {
		for _, r := range rs {
			if r.Ports["http"] == webPort || r.Ports["http"] == apiBase {
				t.Errorf("pool %s: %s is published on a squatted port: %+v", pool, r.Unit, r)
			}
		}
	}

	e.startNginx(squatSite)
	const rate, length = 50, 20 * time.Second
	var wg sync.WaitGroup
	results := map[string]loadgen.Result{}
	var mu sync.Mutex
	for pool, url := range map[string]string{"web": "http://127.0.0.1:8080/", "api": "http://127.0.0.1:8081/"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), length+time.Minute)
			defer cancel()
			r, err := e.loadgen(ctx, url, rate, length)
			if err != nil {
				t.Errorf("load on %s: %v", pool, err)
			}
			mu.Lock()
			results[pool] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	watch.stop()

	webHits, apiHits := e.squatterRequests(webPort), e.squatterRequests(apiBase)
	e.figure("squatter-requests", "rate", rate, "duration", length,
		"web_sent", results["web"].Sent, "web_failed", results["web"].Failed(), "web_squatter", webHits,
		"api_sent", results["api"].Sent, "api_failed", results["api"].Failed(), "api_squatter", apiHits)
	if webHits != 0 || apiHits != 0 {
		t.Errorf("requests reached the squatters: %d on web's port %d, %d on api's port %d", webHits, webPort, apiHits, apiBase)
	}
	for pool, r := range results {
		if r.Sent == 0 || r.Failed() != 0 {
			t.Errorf("load on %s: %s", pool, r)
		}
	}
	if seen := watch.seen(); len(seen) > 0 {
		t.Errorf("a squatter's port was in a discovery file:\n%s", strings.Join(seen, "\n"))
	}

	// The journal names each squatted port with the squatter's uid and
	// PID, once.
	for port, pid := range map[int]int{webPort: webSquat, apiBase: apiSquat} {
		out := e.Sh(fmt.Sprintf("journalctl --no-pager -o verbose MESSAGE_ID=%s FLEXIQ_PORT=%d PRIORITY=4 | grep -E '^ *(MESSAGE|FLEXIQ_HOLDER_UID|FLEXIQ_HOLDER_PID)=' || true", portHeldID, port))
		t.Logf("journal of port %d:\n%s", port, out)
		if n := strings.Count(out, "MESSAGE="); n != 1 {
			t.Errorf("port %d: %d warnings in the journal, want one per episode", port, n)
		}
		if !strings.Contains(out, "FLEXIQ_HOLDER_UID=65534") || !regexp.MustCompile(fmt.Sprintf(`(?m)FLEXIQ_HOLDER_PID=(.* )?%d( |$)`, pid)).MatchString(out) {
			t.Errorf("port %d: the journal does not name uid 65534 and PID %d", port, pid)
		}
	}
}

// squat starts a squatter as nobody, a transient unit of its own, on
// 127.0.0.1:port: flexiq-testservice, which answers /health and counts
// the requests it serves. It returns its PID.
func (e *env) squat(unit string, port int) int {
	e.T.Helper()
	e.Sh(fmt.Sprintf("systemd-run --unit=%s -p User=nobody -p Group=nogroup /usr/local/bin/flexiq-testservice -listen 127.0.0.1:%d", unit, port))
	var pid int
	e.Eventually(10*time.Second, unit+" listening", func() (bool, string) {
		out, _ := e.Try("curl", "-fsS", fmt.Sprintf("http://127.0.0.1:%d/health", port))
		pid, _ = strconv.Atoi(strings.TrimSpace(e.Sh("systemctl show -p MainPID --value " + unit)))
		return strings.TrimSpace(out) != "" && pid > 0, out
	})
	return pid
}

// squatterRequests is what the squatter on port served (/health and
// /metrics excluded), by its own count.
func (e *env) squatterRequests(port int) int {
	e.T.Helper()
	out, err := e.Try("curl", "-fsS", fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		e.T.Fatalf("the squatter on %d does not answer: %v %s", port, err, out)
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "flexiq_testservice_requests_total{"); ok {
			if f := strings.Fields(rest); len(f) == 2 {
				v, _ := strconv.ParseFloat(f[1], 64)
				n += int(v)
			}
		}
	}
	return n
}

// discoveryWatch reads every discovery file four times a second and
// remembers any line with a watched port in it.
type discoveryWatch struct {
	e     *env
	mu    sync.Mutex
	ports []int
	hits  []string
	done  chan struct{}
	once  sync.Once
	ended chan struct{}
}

func (e *env) watchDiscovery() *discoveryWatch {
	w := &discoveryWatch{e: e, done: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(w.ended)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			out, _ := e.Try("sh", "-c", "grep -H . /run/flexiq-scaled/discovery/* 2>/dev/null")
			w.mu.Lock()
			for _, p := range w.ports {
				// "127.0.0.1:PORT" (file_sd, upstreams) or "http": PORT (JSON).
				re := regexp.MustCompile(fmt.Sprintf(`(:|": )%d\b`, p))
				for _, l := range strings.Split(out, "\n") {
					if re.MatchString(l) {
						w.hits = append(w.hits, time.Now().Format("15:04:05.000 ")+l)
					}
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *discoveryWatch) add(port int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ports = append(w.ports, port)
}

func (w *discoveryWatch) stop() {
	w.once.Do(func() { close(w.done) })
	<-w.ended
}

// seen are the lines that named a watched port, at most 20.
func (w *discoveryWatch) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hits[:min(len(w.hits), 20)]
}
