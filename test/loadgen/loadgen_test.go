package loadgen

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// closeConn hijacks the connection and closes it without a response, as a
// replica killed mid-request does.
func closeConn(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

// slow answers after a second unless the client gives up first.
func slow(w http.ResponseWriter, r *http.Request) {
	select {
	case <-time.After(time.Second):
	case <-r.Context().Done():
	}
}

func TestRun(t *testing.T) {
	ok := func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) }
	tests := []struct {
		name    string
		handler http.HandlerFunc
		rate    float64
		timeout time.Duration
		// Each bool: true wants every request sent in that count, false none.
		okAll, conn, timeouts, status5xx bool
		code                             int
	}{
		{name: "healthy at 200 rps", handler: ok, rate: 200, okAll: true},
		{name: "502 from the proxy", handler: func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}, rate: 100, status5xx: true, code: 502},
		{name: "404 is a failure but not a 5xx", handler: http.NotFound, rate: 100, code: 404},
		{name: "connection closed", handler: closeConn, rate: 100, conn: true},
		{name: "body cut short", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.Write([]byte("abc")) // the server then closes the connection
		}, rate: 100, conn: true},
		{name: "timeout", handler: slow, rate: 50, timeout: 100 * time.Millisecond, timeouts: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			r, err := Run(context.Background(), Config{URL: srv.URL, Rate: tt.rate, Duration: time.Second, Timeout: tt.timeout})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			want := int(tt.rate)
			if r.Planned != want || r.Sent != want {
				t.Fatalf("planned %d sent %d, want %d each", r.Planned, r.Sent, want)
			}
			check := func(what string, got int, all bool) {
				if all && got != r.Sent || !all && got != 0 {
					t.Errorf("%s = %d of %d sent, want %v", what, got, r.Sent, map[bool]string{true: "all", false: "none"}[all])
				}
			}
			check("ok", r.OK, tt.okAll)
			check("failed", r.Failed(), !tt.okAll)
			check("conn errors", r.ConnErrors, tt.conn)
			check("timeouts", r.Timeouts, tt.timeouts)
			check("5xx", r.Status5xx, tt.status5xx)
			check("by status", r.ByStatus[tt.code], tt.code != 0)
			if tt.okAll != (len(r.Samples) == 0) || len(r.Samples) > 5 {
				t.Errorf("samples %q: want none on success, 1..5 on failure", r.Samples)
			}
			if tt.okAll && (r.P50 <= 0 || r.P50 > r.P95 || r.P95 > r.P99 || r.P99 > r.Max) {
				t.Errorf("latency p50 %v p95 %v p99 %v max %v: want 0 < p50 ≤ p95 ≤ p99 ≤ max", r.P50, r.P95, r.P99, r.Max)
			}
		})
	}
}

// TestRefused: nothing listening is a connection error for every request.
func TestRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r, err := Run(context.Background(), Config{URL: "http://" + addr + "/", Rate: 50, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != 10 || r.ConnErrors != 10 || !strings.Contains(r.Samples[0], "refused") {
		t.Fatalf("%v: want 10 sent, 10 connection errors, a 'refused' sample", r)
	}
}

// TestOpenLoop: the sender does not wait for answers. A server that holds
// every request for 300 ms still receives every request, with many in
// flight at once (a closed loop would have had one).
func TestOpenLoop(t *testing.T) {
	var mu sync.Mutex
	inFlight, peak := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
	}))
	defer srv.Close()
	r, err := Run(context.Background(), Config{URL: srv.URL, Rate: 100, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != 50 || r.OK != 50 || peak < 5 {
		t.Fatalf("%v; peak in flight %d: want 50 ok and at least 5 in flight at once", r, peak)
	}
}

// TestCanceled: ending ctx stops sending; the requests in hand count as
// canceled, not failed.
func TestCanceled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(slow))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	r, err := Run(ctx, Config{URL: srv.URL, Rate: 50, Duration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent == 0 || r.Sent >= r.Planned || r.Canceled != r.Sent || r.Failed() != 0 {
		t.Fatalf("%v: want some sent, fewer than planned, all canceled, none failed", r)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		c    Config
		want string
	}{
		{"no URL", Config{Rate: 1, Duration: time.Second}, "no URL"},
		{"zero rate", Config{URL: "http://x/", Duration: time.Second}, "rate"},
		{"zero duration", Config{URL: "http://x/", Rate: 1}, "duration"},
		{"bad URL", Config{URL: "http://[::1", Rate: 1, Duration: time.Second}, "loadgen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Run(context.Background(), tt.c); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
