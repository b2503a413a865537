package coord

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkLeaderStep is the leader's CPU per tick on the in-memory store
// (the store's round trips excluded): the decision and the sticky split
// over n live hosts.
func BenchmarkLeaderStep(b *testing.B) {
	for _, n := range []int{3, 100} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			caps := make([]int, n)
			for i := range caps {
				caps[i] = 10
			}
			s := newSim(b, caps...)
			s.pending = int64(5 * n)
			s.run(5, nil)
			l := s.leaders()[0]
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				s.clk.Advance(interval)
				for _, h := range s.hosts {
					if h != l { // the members stay live, heartbeats only
						_ = s.store.as(h.id).Heartbeat(context.Background(), "web", h.self())
					}
				}
				l.c.Step(context.Background())
			}
		})
	}
}
