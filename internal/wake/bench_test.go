package wake

import (
	"context"
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

// firstByteReplica reports, for each connection, when its first byte came.
func firstByteReplica(b *testing.B) (string, <-chan time.Time) {
	ln := listen(b)
	at := make(chan time.Time, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var one [1]byte
				if _, err := c.Read(one[:]); err == nil {
					at <- time.Now()
				}
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln.Addr().String(), at
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkCold is the holder's share of a cold request: from the moment
// the pool's first replica is reported ready to the held connection's
// first byte at that replica. "notify" is a Waker that signals readiness
// (Notifier), "poll" one asked every PollInterval (20 ms).
//
//	go test -run '^$' -bench Cold -benchtime 100x ./internal/wake/
func BenchmarkCold(b *testing.B) {
	for _, notify := range []bool{true, false} {
		name := "poll"
		if notify {
			name = "notify"
		}
		b.Run(name, func(b *testing.B) {
			replica, firstByte := firstByteReplica(b)
			var ds []time.Duration
			for b.Loop() {
				b.StopTimer()
				p := notifyingPool{pool: newPool(), ch: make(chan struct{}, 1)}
				var w Waker = p.pool
				if notify {
					w = p
				}
				ln := listen(b)
				h := New(w, Config{})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { _ = h.Serve(ctx, ln); close(done) }()
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Write([]byte("x")); err != nil {
					b.Fatal(err)
				}
				for h.Stats().HeldNow != 1 || h.Stats().WakeRequests == 0 {
					time.Sleep(time.Millisecond)
				}
				b.StartTimer()
				start := time.Now()
				p.set(replica)
				ds = append(ds, (<-firstByte).Sub(start))
				b.StopTimer()
				c.Close()
				cancel()
				<-done
				ln.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(median(ds).Microseconds()), "µs-median-ready-to-first-byte")
		})
	}
}

// BenchmarkWarm is the holder's cost per connection once a replica is
// ready: a connection, 64 bytes each way and the close, through the holder
// against the same straight to the replica.
//
//	go test -run '^$' -bench Warm -benchtime 2000x ./internal/wake/
func BenchmarkWarm(b *testing.B) {
	replica, _ := echoReplica(b)
	p := newPool()
	p.set(replica)
	ln := listen(b)
	h := New(p, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = h.Serve(ctx, ln) }()
	payload := make([]byte, 64)
	for _, target := range []struct{ name, addr string }{{"direct", replica}, {"holder", ln.Addr().String()}} {
		b.Run(target.name, func(b *testing.B) {
			var ds []time.Duration
			for b.Loop() {
				start := time.Now()
				got, err := roundTrip(target.addr, payload)
				if err != nil || len(got) != len(payload) {
					b.Fatalf("round trip: %d bytes, %v", len(got), err)
				}
				ds = append(ds, time.Since(start))
			}
			b.ReportMetric(float64(median(ds).Microseconds()), "µs-median-per-conn")
		})
	}
}
