package wake

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pool is a Waker whose replicas the test makes ready.
type pool struct {
	mu    sync.Mutex
	addrs []string
	wakes atomic.Int64
	woken chan struct{} // closed at the first Wake
	once  sync.Once
}

func newPool() *pool { return &pool{woken: make(chan struct{})} }

func (p *pool) Wake(context.Context) error {
	p.wakes.Add(1)
	p.once.Do(func() { close(p.woken) })
	return nil
}

func (p *pool) Ready(context.Context) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.addrs...), nil
}

func (p *pool) set(addrs ...string) {
	p.mu.Lock()
	p.addrs = addrs
	p.mu.Unlock()
}

// notifyingPool adds Notifier, for the benchmarks' cold path.
type notifyingPool struct {
	*pool
	ch chan struct{}
}

func (p notifyingPool) Changed() <-chan struct{} { return p.ch }

func (p notifyingPool) set(addrs ...string) {
	p.pool.set(addrs...)
	select {
	case p.ch <- struct{}{}:
	default:
	}
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// echoReplica serves each connection by echoing it until EOF, then
// half-closing: a replica for byte-for-byte checks both ways. conns counts
// the connections it served.
func echoReplica(t testing.TB) (addr string, conns *atomic.Int64) {
	ln := listen(t)
	conns = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
				_ = c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return ln.Addr().String(), conns
}

// refusingAddr is a loopback port nothing listens on.
func refusingAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// serve runs a Holder on a fresh loopback listener and returns its address
// and Serve's result.
func serve(t testing.TB, w Waker, cfg Config) (h *Holder, addr string, done <-chan error, ln net.Listener) {
	t.Helper()
	ln = listen(t)
	h = New(w, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	finished := make(chan struct{})
	var serveErr error
	go func() {
		serveErr = h.Serve(ctx, ln)
		errc <- serveErr
		close(finished)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
			if err := serveErr; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrIdle) {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after its context ended")
		}
	})
	return h, ln.Addr().String(), errc, ln
}

// eventually polls cond for up to 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
