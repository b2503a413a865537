package wake

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// roundTrip sends payload, half-closes and returns all it reads back.
func roundTrip(addr string, payload []byte) ([]byte, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		return got, err
	}
	return got, <-werr
}

func TestHeldConnectionForwardedByteForByte(t *testing.T) {
	p := newPool()
	var mu sync.Mutex
	var cycles []Cycle
	h, addr, _, _ := serve(t, p, Config{OnWake: func(c Cycle) { mu.Lock(); cycles = append(cycles, c); mu.Unlock() }})
	replica, served := echoReplica(t)

	payload := make([]byte, 256<<10)
	_, _ = rand.Read(payload)
	type result struct {
		got []byte
		err error
	}
	res := make(chan result, 1)
	go func() { got, err := roundTrip(addr, payload); res <- result{got, err} }()

	select {
	case <-p.woken:
	case <-time.After(5 * time.Second):
		t.Fatal("the pool was not woken by a connection")
	}
	eventually(t, "one held connection", func() bool { return h.Stats().HeldNow == 1 })
	time.Sleep(300 * time.Millisecond) // readiness comes late
	if served.Load() != 0 {
		t.Fatal("the replica saw a connection before it was ready")
	}
	p.set(replica)
	r := <-res
	if r.err != nil {
		t.Fatalf("round trip: %v", r.err)
	}
	if !bytes.Equal(r.got, payload) {
		t.Fatalf("forwarded %d bytes back, want the %d sent, byte for byte", len(r.got), len(payload))
	}
	s := h.Stats()
	if s.Forwarded != 1 || s.HeldNow != 0 || s.Wakes != 1 || s.WakeRequests < 1 || s.LastTimeToReady < 300*time.Millisecond {
		t.Fatalf("stats %+v", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(cycles) != 1 || !cycles[0].Ready || cycles[0].Held != 1 || cycles[0].TimeToReady < 300*time.Millisecond {
		t.Fatalf("wake-ups reported %+v, want one, ready, with 1 held", cycles)
	}
}

func TestBurstHeldThenAllForwarded(t *testing.T) {
	const n = 200
	p := newPool()
	h, addr, _, _ := serve(t, p, Config{})
	r1, served1 := echoReplica(t)
	r2, served2 := echoReplica(t)

	errs := make(chan error, n)
	for i := range n {
		go func() {
			want := []byte(fmt.Sprintf("connection %d\n%s", i, bytes.Repeat([]byte{byte(i)}, 1000+i)))
			got, err := roundTrip(addr, want)
			if err == nil && !bytes.Equal(got, want) {
				err = fmt.Errorf("connection %d: got %d bytes back, want %d", i, len(got), len(want))
			}
			errs <- err
		}()
	}
	eventually(t, fmt.Sprintf("%d held connections", n), func() bool { return h.Stats().HeldNow == n })
	p.set(r1, r2)
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	s := h.Stats()
	if s.Forwarded != n || s.Rejected != 0 || s.Closed != 0 || s.HeldNow != 0 {
		t.Fatalf("stats %+v, want %d forwarded and none refused", s, n)
	}
	if served1.Load() == 0 || served2.Load() == 0 || served1.Load()+served2.Load() != n {
		t.Fatalf("replicas served %d and %d, want %d spread over both", served1.Load(), served2.Load(), n)
	}
	if p.wakes.Load() > 3 {
		t.Fatalf("%d wake requests for one burst, want them spaced by WakeInterval", p.wakes.Load())
	}
}

func get(t *testing.T, addr, method string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+"/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s body: %v", method, err)
	}
	return resp, body
}

func TestHoldTimeoutAnswers503ForHTTP(t *testing.T) {
	p := newPool()
	h, addr, _, _ := serve(t, p, Config{HoldTimeout: 300 * time.Millisecond, RetryAfter: 2500 * time.Millisecond})
	for _, method := range []string{"GET", "HEAD", "POST"} {
		start := time.Now()
		resp, body := get(t, addr, method)
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Errorf("%s answered after %v, before the hold was over", method, took)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "3" {
			t.Errorf("%s: %s, Retry-After %q; want 503 and 3", method, resp.Status, resp.Header.Get("Retry-After"))
		}
		if (method == "HEAD") != (len(body) == 0) {
			t.Errorf("%s: body %q", method, body)
		}
	}

	// Another protocol (a TLS ClientHello's first bytes) is closed, not
	// answered in HTTP.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if len(got) != 0 {
		t.Errorf("a non-HTTP connection got %q (%v), want it closed", got, err)
	}
	if s := h.Stats(); s.Rejected != 3 || s.Closed != 1 || s.Forwarded != 0 {
		t.Errorf("stats %+v", s)
	}
}

func httpReplica(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "replica %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func TestRejectModeAnswersAtOnceAndWakes(t *testing.T) {
	p := newPool()
	h, addr, _, _ := serve(t, p, Config{Mode: ModeReject, HoldTimeout: time.Hour, RetryAfter: 7 * time.Second})
	start := time.Now()
	resp, _ := get(t, addr, "GET")
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("reject mode answered after %v, want at once", took)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("%s, Retry-After %q; want 503 and 7", resp.Status, resp.Header.Get("Retry-After"))
	}
	select {
	case <-p.woken:
	case <-time.After(5 * time.Second):
		t.Fatal("reject mode did not wake the pool")
	}
	p.set(httpReplica(t))
	// The retry after the cold start is forwarded.
	eventually(t, "a ready replica seen", func() bool { return h.Stats().Wakes == 1 })
	resp, body := get(t, addr, "GET")
	if resp.StatusCode != 200 || string(body) != "replica /x" {
		t.Fatalf("retry: %s %q, want 200 from the replica", resp.Status, body)
	}
	if s := h.Stats(); s.Rejected != 1 || s.Forwarded != 1 || s.HeldNow != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRefusingReplicaSkipped(t *testing.T) {
	p := newPool()
	good, served := echoReplica(t)
	p.set(refusingAddr(t), good)
	// Polls too rare to matter within the hold: a connection must reach
	// the good replica within its first forward, not on a poll after.
	h, addr, _, _ := serve(t, p, Config{HoldTimeout: 2 * time.Second, PollInterval: time.Minute, RefreshInterval: time.Minute})
	for i := range 6 {
		want := []byte(fmt.Sprintf("hello %d", i))
		got, err := roundTrip(addr, want)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("connection %d: %q, %v", i, got, err)
		}
	}
	if served.Load() != 6 || h.Stats().DialErrors == 0 {
		t.Fatalf("good replica served %d of 6, dial errors %d", served.Load(), h.Stats().DialErrors)
	}
}

func TestOnlyRefusingReplicas503AfterHold(t *testing.T) {
	p := newPool()
	p.set(refusingAddr(t))
	h, addr, _, _ := serve(t, p, Config{HoldTimeout: 300 * time.Millisecond})
	resp, _ := get(t, addr, "GET")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%s, want 503 with Retry-After", resp.Status)
	}
	if s := h.Stats(); s.DialErrors < 2 || s.Rejected != 1 {
		t.Fatalf("stats %+v: want the replica retried while held, then 503", s)
	}
}

func TestIdleExitLeavesTheSocketListening(t *testing.T) {
	p := newPool()
	replica, _ := echoReplica(t)
	p.set(replica)
	h, addr, done, ln := serve(t, p, Config{IdleExit: 300 * time.Millisecond})

	// A forwarded connection in hand keeps the process up past IdleExit.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "one forwarded connection", func() bool { return h.Stats().ForwardingNow == 1 })
	select {
	case err := <-done:
		t.Fatalf("Serve returned (%v) with a connection in hand", err)
	case <-time.After(700 * time.Millisecond):
	}
	c.Close()
	select {
	case err := <-done:
		if err != ErrIdle {
			t.Fatalf("Serve returned %v, want ErrIdle", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not exit after its idle time")
	}

	// The socket still listens, as systemd's would: a connection made now
	// waits in the kernel for the next process, which forwards it.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("a connection after the idle exit was refused: %v", err)
	}
	defer c2.Close()
	if _, err := c2.Write([]byte("after the exit")); err != nil {
		t.Fatal(err)
	}
	_ = c2.(*net.TCPConn).CloseWrite()
	next := New(p, Config{IdleExit: 300 * time.Millisecond})
	errc := make(chan error, 1)
	go func() { errc <- next.Serve(t.Context(), ln) }()
	got, err := io.ReadAll(bufio.NewReader(c2))
	if err != nil || string(got) != "after the exit" {
		t.Fatalf("the queued connection got %q, %v", got, err)
	}
	if err := <-errc; err != ErrIdle {
		t.Fatalf("the second Serve returned %v", err)
	}
}

// TestStaysWhileCold: with no replica ready, the holder outlives its idle
// time (the first connection of the next wake-up must not wait for a
// process to start), and exits once the pool is awake. The old holder
// exited after IdleExit whatever the pool's state.
func TestStaysWhileCold(t *testing.T) {
	p := newPool()
	_, _, done, _ := serve(t, p, Config{IdleExit: 100 * time.Millisecond})
	select {
	case err := <-done:
		t.Fatalf("Serve returned (%v) with the pool at zero", err)
	case <-time.After(600 * time.Millisecond):
	}
	if n := p.wakes.Load(); n != 0 {
		t.Fatalf("%d wake requests with no connection", n)
	}
	replica, _ := echoReplica(t)
	p.set(replica)
	select {
	case err := <-done:
		if err != ErrIdle {
			t.Fatalf("Serve returned %v, want ErrIdle", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not exit after its idle time with the pool awake")
	}
}

func TestLooksHTTP1(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", true},
		{"POST /a HTTP/1.0\r\n", true},
		{"GET /still-arriving", true},
		{"HEAD ", true},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", false},
		{"GET / HTTP/2\r\n", false},
		{"\x16\x03\x01", false},
		{"SSH-2.0-OpenSSH\r\n", false},
		{"get / HTTP/1.1\r\n", false},
		{"", false},
	} {
		if got := looksHTTP1([]byte(tc.in)); got != tc.want {
			t.Errorf("looksHTTP1(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		want bool
	}{{"", true}, {"GE", true}, {"GET", true}, {"PR", false}, {"XYZ ", false}} {
		if got := couldBeHTTP1([]byte(tc.in)); got != tc.want {
			t.Errorf("couldBeHTTP1(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
