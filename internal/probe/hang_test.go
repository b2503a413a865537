package probe

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hostile is a replica's listener that answers each probe its own way and
// says when the daemon has let go of the connection (closed it).
type hostile struct {
	url      string
	accepted chan struct{} // one per request read
	released chan struct{} // one per connection the client closed
}

// hostileReplica serves answer on every connection once the request's head
// has been read; answer returns when it has nothing more to send, and the
// connection is then held until the client closes it.
func hostileReplica(t *testing.T, answer func(c net.Conn)) *hostile {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostile{url: "http://" + l.Addr().String() + "/health", accepted: make(chan struct{}, 16), released: make(chan struct{}, 16)}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				go func() { <-done; c.Close() }()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				h.accepted <- struct{}{}
				answer(c)
				// Held: nothing more is sent, and the read ends only when
				// the client closes.
				io.Copy(io.Discard, c)
				h.released <- struct{}{}
			}()
		}
	}()
	return h
}

// switching answers 101 Switching Protocols and holds the socket: the
// connection is then the replica's, outside HTTP and its deadlines.
func switching(c net.Conn) {
	io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
}

// trickling sends a 200's headers, then its body a byte every 50 ms: each
// read makes progress, and the body takes a minute.
func trickling(c net.Conn) {
	io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1200\r\n\r\n")
	for range 1200 {
		if _, err := c.Write([]byte{'x'}); err != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// silent reads the request and never answers.
func silent(net.Conn) {}

// hangMargin is what a check may take past its timeout: generous for a
// loaded machine, and far below the minutes a hang takes.
const hangMargin = 2 * time.Second

// A replica cannot hold a probe past its timeout, whatever it answers; a
// 101 (which hands the connection over, out of net/http's deadlines) is a
// failure, and the connection is let go.
func TestHTTPCheckCannotHang(t *testing.T) {
	tests := []struct {
		name   string
		answer func(net.Conn)
		want   string
	}{
		{"101 and the socket held", switching, "status 101"},
		{"headers, then a trickled body", trickling, "reading the body"},
		{"no answer", silent, "deadline exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := hostileReplica(t, tc.answer)
			check, err := HTTPCheck(NewHTTPClient(), h.url)
			if err != nil {
				t.Fatal(err)
			}
			const timeout = 300 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- check(ctx) }()
			select {
			case err := <-done:
				took := time.Since(start)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("check = %v, want a failure with %q", err, tc.want)
				}
				if took > timeout+hangMargin {
					t.Errorf("check took %s, want its timeout %s (+ %s)", took, timeout, hangMargin)
				}
			case <-time.After(timeout + hangMargin):
				t.Fatalf("check still running %s after it began, with a timeout of %s", timeout+hangMargin, timeout)
			}
			select {
			case <-h.released:
			case <-time.After(hangMargin):
				t.Errorf("the probe's connection is still open %s after the check returned", hangMargin)
			}
		})
	}
}

// Close neither waits for the attempts in flight nor for a check that
// ignores its context: a reload that replaces the prober must not wait on
// a replica. The attempts in flight are cancelled, and let go of their
// connections.
func TestProberCloseWhileChecksHang(t *testing.T) {
	p := New(SystemClock(nil), 16)
	// Long timeouts: the checks are in flight when Close comes.
	spec := Spec{Period: 30 * time.Second, Timeout: 30 * time.Second}
	var replicas []*hostile
	for _, answer := range []func(net.Conn){switching, trickling, silent} {
		h := hostileReplica(t, answer)
		check, err := HTTPCheck(NewHTTPClient(), h.url)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Add(Target{ID: h.url, Check: check, Spec: spec}); err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, h)
	}
	// And a check that ignores its context until the test ends.
	stuck, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	deaf := func(context.Context) error { close(stuck); <-release; return nil }
	if err := p.Add(Target{ID: "deaf", Check: deaf, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	for _, h := range replicas {
		select {
		case <-h.accepted:
		case <-time.After(10 * time.Second):
			t.Fatal("the first attempts did not reach the replicas")
		}
	}
	<-stuck
	closed := make(chan struct{})
	start := time.Now()
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
		t.Logf("Close returned in %s", time.Since(start).Round(time.Millisecond))
	case <-time.After(hangMargin):
		t.Fatalf("Close still waits %s later, on checks in flight", hangMargin)
	}
	if _, open := <-p.Transitions(); open {
		t.Error("Transitions still open after Close")
	}
	for i, h := range replicas {
		select {
		case <-h.released:
		case <-time.After(hangMargin):
			t.Errorf("replica %d: the cancelled attempt's connection is still open %s after Close", i, hangMargin)
		}
	}
}

// A check that ignores its context fails its attempt at the timeout, and
// is not started again while it still runs: one stuck check per target
// at most, and the replica leaves discovery as its failures say.
func TestProberAttemptBoundedByTimeout(t *testing.T) {
	r := newRig(t)
	release := make(chan struct{})
	var calls atomic.Int32
	deaf := func(context.Context) error {
		calls.Add(1)
		<-release
		return nil
	}
	spec := Spec{Period: time.Second, Timeout: 100 * time.Millisecond, FailureThreshold: 2}
	if err := r.p.Add(Target{ID: "deaf", Check: deaf, Spec: spec, Initial: Ready}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(spec.Period)
	r.attempted()
	r.clock.Advance(spec.Period)
	r.attempted()
	tr, sent := r.transition()
	if !sent || tr.To != NotReady || tr.Err == nil || !strings.Contains(tr.Err.Error(), "still not returned") {
		t.Fatalf("after two attempts on a stuck check: transition %+v (sent %v), want NotReady saying the check has not returned", tr, sent)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the check was started %d times while the first still ran, want once", n)
	}
	st, _ := r.p.Status("deaf")
	close(release)
	r.p.attempts.Wait()
	if st.LastErr == nil || !strings.Contains(st.LastErr.Error(), "still not returned") {
		t.Errorf("LastErr = %v", st.LastErr)
	}
	r.clock.Advance(spec.Period)
	r.attempted()
	if n := calls.Load(); n != 2 {
		t.Errorf("the check was started %d times in all, want a second start once the first returned", n)
	}
}
