package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// The store's traffic per tick against the real server (test/e2e's
// TestFleetPgStore runs these with -test.benchtime 50x):
//
//	FLEXIQ_FLEET_PG_BENCH=1 go test -run '^TestFleetPgStore$' -v ./test/e2e/
//
// statements/op is what the package's doc says; ms/op is the latency on
// the machine running it (one client, the server on loopback).

func benchStore(b *testing.B) (*Store, string) {
	b.Helper()
	u := pgURLFromEnv()
	if u == "" {
		b.Skip("FLEXIQ_TEST_PG_URL is not set")
	}
	s := New(configConn(u), Options{Schema: testSchema, ApplicationName: "pgstore-bench"})
	b.Cleanup(func() { s.Close() })
	pool := fmt.Sprintf("%s-%d", b.Name(), time.Now().UnixNano())
	if _, _, err := s.ReadPlan(context.Background(), pool); err != nil {
		b.Fatal(err)
	}
	return s, pool
}

// One follower's tick: Heartbeat, ReadPlan.
func BenchmarkPgFollowerTick(b *testing.B) {
	s, pool := benchStore(b)
	ctx := context.Background()
	before := s.Stats().Statements
	b.ResetTimer()
	for range b.N {
		if err := s.Heartbeat(ctx, pool, fleet.Member{ID: "h1", Capacity: 4}); err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.ReadPlan(ctx, pool); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(s.Stats().Statements-before)/float64(b.N), "statements/op")
}

// The leader's tick: Acquire (renewal; in the daemon once per ~5 s, here
// every tick, the worst case), Heartbeat, Members, WritePlan.
func BenchmarkPgLeaderTick(b *testing.B) {
	s, pool := benchStore(b)
	ctx := context.Background()
	l, _, err := s.Acquire(ctx, pool, "h1", 0, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	before := s.Stats().Statements
	b.ResetTimer()
	for range b.N {
		if _, held, err := s.Acquire(ctx, pool, "h1", l.Epoch, time.Minute); err != nil || !held {
			b.Fatal(held, err)
		}
		if err := s.Heartbeat(ctx, pool, fleet.Member{ID: "h1", Capacity: 4}); err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.Members(ctx, pool); err != nil {
			b.Fatal(err)
		}
		if err := s.WritePlan(ctx, pool, "h1", l.Epoch, fleet.Plan{Target: 4, Shares: map[string]int{"h1": 4}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(s.Stats().Statements-before)/float64(b.N), "statements/op")
}

// A whole fleet's tick at 100 hosts, as the server sees it (one client
// standing in for all hosts): 100 heartbeats, 99 plan reads, the
// leader's member list (100 rows) and plan, and 20 lease attempts (a 1 s
// tick, each host trying once per 5 s).
func BenchmarkPgFleetTick100(b *testing.B) {
	const hosts = 100
	s, pool := benchStore(b)
	ctx := context.Background()
	l, _, err := s.Acquire(ctx, pool, "host-000", 0, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	shares := map[string]int{}
	for h := range hosts {
		shares[fmt.Sprintf("host-%03d", h)] = 1
	}
	before := s.Stats().Statements
	b.ResetTimer()
	for i := range b.N {
		for h := range hosts {
			id := fmt.Sprintf("host-%03d", h)
			if err := s.Heartbeat(ctx, pool, fleet.Member{ID: id, Capacity: 4, Live: 1}); err != nil {
				b.Fatal(err)
			}
			if h == 0 {
				if _, _, err := s.Members(ctx, pool); err != nil {
					b.Fatal(err)
				}
				if err := s.WritePlan(ctx, pool, id, l.Epoch, fleet.Plan{Target: hosts, Shares: shares}); err != nil {
					b.Fatal(err)
				}
			} else if _, _, err := s.ReadPlan(ctx, pool); err != nil {
				b.Fatal(err)
			}
			if h%5 == i%5 {
				epoch := uint64(0)
				if h == 0 {
					epoch = l.Epoch
				}
				if _, _, err := s.Acquire(ctx, pool, id, epoch, time.Minute); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(s.Stats().Statements-before)/float64(b.N), "statements/op")
}
