package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// get returns the status and body of GET path on h.
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestHealth(t *testing.T) {
	tests := []struct {
		name           string
		ready, failing bool
		want           int
	}{
		{"loading", false, false, http.StatusServiceUnavailable},
		{"ready", true, false, http.StatusOK},
		{"ready but told to fail", true, true, http.StatusServiceUnavailable},
		{"loading and told to fail", false, true, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newService("web", "1", 0, 0)
			s.ready.Store(tt.ready)
			s.failing.Store(tt.failing)
			if code, body := get(t, s.handler(), "/health"); code != tt.want {
				t.Fatalf("/health = %d %q, want %d", code, body, tt.want)
			}
		})
	}
}

// TestReadyAfter runs the service for real: /health answers 503 until the
// ready timer fires, then 200; -fail-health-after turns it back to 503.
func TestReadyAfter(t *testing.T) {
	c := config{readyAfter: 200 * time.Millisecond, failHealthAfter: 300 * time.Millisecond, drainTimeout: time.Second}
	s, url, stop := start(t, c)
	defer stop()
	if code := status(t, url+"/health"); code != http.StatusServiceUnavailable {
		t.Fatalf("/health before -ready-after = %d, want 503", code)
	}
	waitFor(t, "ready", func() bool { return status(t, url+"/health") == http.StatusOK })
	waitFor(t, "failing", s.failing.Load)
	if code := status(t, url+"/health"); code != http.StatusServiceUnavailable {
		t.Fatalf("/health after -fail-health-after = %d, want 503", code)
	}
}

// TestHealthToggle: each SIGUSR2 flips a ready replica between failing and
// passing its probe.
func TestHealthToggle(t *testing.T) {
	s := newService("web", "1", 0, 0)
	s.ready.Store(true)
	watchHealthToggle(log.New(io.Discard, "", 0), s)
	for i, want := range []bool{true, false, true} {
		if i > 0 {
			if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, fmt.Sprintf("healthy=%v after %d SIGUSR2", want, i), func() bool { return s.healthy() == want })
	}
}

func TestWorkBodyAndLatency(t *testing.T) {
	tests := []struct {
		name            string
		latency, jitter time.Duration
	}{
		{"no latency", 0, 0},
		{"latency", 50 * time.Millisecond, 0},
		{"latency and jitter", 30 * time.Millisecond, 20 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newService("web", "3", tt.latency, tt.jitter)
			t0 := time.Now()
			code, body := get(t, s.handler(), "/v1/complete")
			// A lower bound only: the sleep is at least the latency however
			// slow the machine is.
			if took := time.Since(t0); took < tt.latency {
				t.Errorf("answered in %v, want at least %v", took, tt.latency)
			}
			if code != http.StatusOK || !strings.Contains(body, "slot=3") || !strings.Contains(body, "path=/v1/complete") {
				t.Errorf("got %d %q, want 200 naming slot 3 and the path", code, body)
			}
		})
	}
}

// TestMetricsInFlight checks the gauge rises during a slow request and the
// counter counts it by code afterwards, with the replica's identity.
func TestMetricsInFlight(t *testing.T) {
	s := newService("web", "2", time.Hour, 0)
	h := s.handler()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	}()
	waitFor(t, "in flight 1", func() bool {
		_, m := get(t, h, "/metrics")
		return strings.Contains(m, "flexiq_testservice_requests_in_flight 1\n")
	})
	cancel()
	<-done
	s.latency = 0
	get(t, h, "/")
	_, m := get(t, h, "/metrics")
	for _, want := range []string{
		"flexiq_testservice_requests_in_flight 0\n",
		`flexiq_testservice_requests_total{code="200"} 1` + "\n",
		`flexiq_testservice_requests_total{code="499"} 1` + "\n",
		`flexiq_testservice_info{pool="web",slot="2"} 1` + "\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, m)
		}
	}
}

// TestGracefulShutdown: a request in hand when the stop comes finishes with
// 200, a new connection is refused, and run returns nil.
func TestGracefulShutdown(t *testing.T) {
	c := config{latency: 500 * time.Millisecond, drainTimeout: 5 * time.Second}
	s, url, stop := start(t, c)
	result := make(chan int, 1)
	go func() { result <- status(t, url+"/slow") }()
	waitFor(t, "request in flight", func() bool {
		_, m := get(t, s.handler(), "/metrics")
		return strings.Contains(m, "in_flight 1\n")
	})
	errc := stop()
	waitFor(t, "listener closed", func() bool {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
	if code := <-result; code != http.StatusOK {
		t.Errorf("in-flight request got %d, want 200", code)
	}
	if err := <-errc; err != nil {
		t.Errorf("run: %v, want a clean stop", err)
	}
}

// TestNotify: with NOTIFY_SOCKET set, the service sends READY=1 once ready
// (not before) and STOPPING=1 when told to stop, as a Type=notify unit must.
func TestNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	c := config{readyAfter: 100 * time.Millisecond, drainTimeout: time.Second}
	s, _, stop := startNotify(t, c, path)
	for _, want := range []string{"READY=1", "STOPPING=1"} {
		if err := sock.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 256)
		n, err := sock.Read(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("notify socket got %q, %v; want %q", buf[:n], err, want)
		}
		if want == "READY=1" {
			if !s.ready.Load() {
				t.Fatal("READY=1 sent before /health answers 200")
			}
			if err := <-stop(); err != nil {
				t.Fatalf("run: %v", err)
			}
		}
	}
}

// TestShutdownTimeout: a request longer than -drain-timeout makes run fail,
// so the exit status says the drain was cut short.
func TestShutdownTimeout(t *testing.T) {
	c := config{latency: time.Hour, drainTimeout: 100 * time.Millisecond}
	s, url, stop := start(t, c)
	go func() { _, _ = http.Get(url + "/stuck") }()
	waitFor(t, "request in flight", func() bool {
		_, m := get(t, s.handler(), "/metrics")
		return strings.Contains(m, "in_flight 1\n")
	})
	if err := <-stop(); err == nil || !strings.Contains(err.Error(), "graceful shutdown") {
		t.Fatalf("run = %v, want a graceful-shutdown timeout error", err)
	}
}

// start runs the service on an ephemeral loopback port; stop cancels it and
// returns run's result (call it at most once).
func start(t *testing.T, c config) (*service, string, func() <-chan error) {
	return startNotify(t, c, "")
}

// startNotify is start with NOTIFY_SOCKET set to notifySocket.
func startNotify(t *testing.T, c config, notifySocket string) (*service, string, func() <-chan error) {
	t.Helper()
	t.Setenv("NOTIFY_SOCKET", notifySocket) // never the test runner's own manager's
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newService("web", "1", c.latency, c.jitter)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, s, ln, c, log.New(io.Discard, "", 0)) }()
	return s, "http://" + ln.Addr().String(), func() <-chan error { cancel(); return errc }
}

// status returns the status of GET url, or 0 on a transport error.
func status(t *testing.T, url string) int {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// waitFor polls cond for up to 5 s (a bound against hangs, not a timing).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
