package coord

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"
)

// steady is three hosts after a burst, settled.
func steady(t *testing.T) *sim {
	t.Helper()
	s := newSim(t, 20, 20, 20)
	s.run(2, nil)
	s.pending = 90
	s.run(10, nil)
	if s.total() != 9 || len(s.leaders()) != 1 {
		t.Fatalf("not settled: lives %v, %d leaders", s.lives(), len(s.leaders()))
	}
	return s
}

// TestLeaderLoss stops the leader (handover: Resign, with the released
// notification waking the others, or without it) or kills it (no Resign),
// and measures in fake time until another host leads; the fleet's total
// never drops meanwhile (a stopped daemon's workers run on).
func TestLeaderLoss(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resign bool
		wake   bool
		within time.Duration
	}{
		{"stop, released notification", true, true, interval},
		{"stop, no notification", true, false, renew*6/5 + interval},
		{"SIGKILL", false, false, ttl + interval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := steady(t)
			old := s.leaders()[0]
			oldEpoch := old.c.Snapshot().Epoch
			before := s.total()
			if tc.resign {
				if err := old.c.Resign(context.Background()); err != nil {
					t.Fatal(err)
				}
				if n := count(old.events, LeaderLost); n != 1 {
					t.Errorf("%d leader-lost events on resign", n)
				}
			}
			old.dead = true
			if tc.wake {
				for _, h := range s.hosts {
					if h != old {
						h.c.Wake()
					}
				}
			}
			stopped := s.clk.Now()
			var took time.Duration
			for took == 0 && s.clk.Now().Sub(stopped) < 3*ttl {
				s.tick()
				if s.total() < before {
					t.Fatalf("fleet total dropped to %d (from %d) at %s: %v", s.total(), before, s.clk.Now().Sub(stopped), s.lives())
				}
				if ls := s.leaders(); len(ls) == 1 {
					took = s.clk.Now().Sub(stopped)
					if ep := ls[0].c.Snapshot().Epoch; ep <= oldEpoch {
						t.Errorf("new leader's epoch %d, old %d", ep, oldEpoch)
					}
				} else if len(ls) > 1 {
					t.Fatalf("%d leaders", len(ls))
				}
			}
			t.Logf("%s: new leader after %s (bound %s)", tc.name, took, tc.within)
			if took == 0 || took > tc.within {
				t.Errorf("new leader after %s, want within %s", took, tc.within)
			}
			// The old host's share moves to the others once it is gone.
			s.run(10, func() {
				if s.total() < before {
					t.Fatalf("fleet total dropped to %d: %v", s.total(), s.lives())
				}
			})
			if st := s.leaders()[0].c.Snapshot(); len(st.Plan.Shares) != 2 || st.Plan.Target != 9 {
				t.Errorf("plan after the loss: %+v, want 9 over the 2 live hosts", st.Plan)
			}
		})
	}
}

// TestPausedLeader pauses the leader past the TTL while the others go on,
// then resumes it: with its clock having moved on (SIGSTOP: the monotonic
// clock runs) it steps down on its own clock before any write; with a
// clock that stopped too it tries once and the store fences it. Either
// way no plan lands with the old epoch once another host leads, and the
// epochs never decrease.
func TestPausedLeader(t *testing.T) {
	for _, tc := range []struct {
		name     string
		freeze   bool
		reason   Reason
		attempts int // writes with the old epoch tried after the resume
	}{
		{"clock runs on (SIGSTOP)", false, ReasonExpired, 0},
		{"clock frozen too", true, ReasonFenced, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := steady(t)
			old := s.leaders()[0]
			oldEpoch := old.c.Snapshot().Epoch
			old.paused = true
			if tc.freeze {
				at := s.clk.Now()
				old.frozen = &at
			}
			s.run(int((ttl+2*interval)/interval)+1, nil)
			ls := s.leaders()
			if len(ls) != 1 || ls[0] == old {
				t.Fatalf("no other leader while paused")
			}
			resumed := len(s.store.writes)
			old.paused = false
			s.run(10, func() {
				if old.c.Snapshot().Leader {
					t.Fatalf("the paused leader leads again at tick %d", s.ticks)
				}
			})
			tried := 0
			for _, w := range s.store.writes[resumed:] {
				if w.Holder == old.id && w.Epoch == oldEpoch {
					tried++
					if w.Accepted {
						t.Errorf("a plan landed with the old epoch %d: %+v", oldEpoch, w)
					}
				}
			}
			if tried != tc.attempts {
				t.Errorf("%d writes tried with the old epoch after the resume, want %d", tried, tc.attempts)
			}
			lost := old.events[len(old.events)-1]
			if lost.Kind != LeaderLost || lost.Reason != tc.reason {
				t.Errorf("last event %+v, want leader-lost (%s)", lost, tc.reason)
			}
			var last uint64
			for _, w := range s.store.writes {
				if w.Accepted && w.Epoch < last {
					t.Errorf("accepted epoch %d after %d", w.Epoch, last)
				}
				if w.Accepted {
					last = w.Epoch
				}
			}
			for i := 1; i < len(s.store.leases); i++ {
				if s.store.leases[i].Epoch <= s.store.leases[i-1].Epoch {
					t.Errorf("lease epochs %d then %d", s.store.leases[i-1].Epoch, s.store.leases[i].Epoch)
				}
			}
		})
	}
}

// TestLostLease: the store loses the lease under a live leader (a Redis
// that lost the key): its next plan is fenced, it steps down at once, a
// host takes a later epoch (perhaps the same host, for a new term), and the fleet's total never drops.
func TestLostLease(t *testing.T) {
	s := steady(t)
	old := s.leaders()[0]
	oldEpoch := old.c.Snapshot().Epoch
	before := s.total()
	s.store.loseLease()
	s.run(10, func() {
		if s.total() < before {
			t.Fatalf("fleet total dropped to %d: %v", s.total(), s.lives())
		}
	})
	if n := count(old.events, LeaderLost); n != 1 {
		t.Fatalf("%d leader-lost events, want 1: %+v", n, old.events)
	}
	for _, e := range old.events {
		// Fenced when its plan comes first; expired when its renewal
		// does and finds the lease free: it takes a new term then.
		if e.Kind == LeaderLost && e.Reason != ReasonFenced && e.Reason != ReasonExpired {
			t.Errorf("lost with %s, want fenced or expired", e.Reason)
		}
	}
	ls := s.leaders()
	if len(ls) != 1 || ls[0].c.Snapshot().Epoch <= oldEpoch {
		t.Fatalf("%d leaders after the loss, want one at an epoch above %d", len(ls), oldEpoch)
	}
	for _, w := range s.store.writes {
		if w.Epoch == oldEpoch && w.Accepted && w.At.After(s.store.leases[len(s.store.leases)-1].Expires.Add(-ttl)) {
			t.Errorf("a plan with the old epoch landed after the new lease: %+v", w)
		}
	}
}

// TestRestartedLeaderTakesANewTerm: the leader's daemon dies and is back
// at once (systemd's Restart=), same host id, a new incarnation; from the
// plan it reads, it knows the old term's epoch. It must not renew that
// term as its own: the next term, whoever takes it once the old lease
// lapses, has a higher epoch, and there is never more than one leader.
func TestRestartedLeaderTakesANewTerm(t *testing.T) {
	s := newSim(t, 20, 20, 20)
	for _, h := range s.hosts {
		s.build(h, 0.5, "first")
	}
	s.run(2, nil)
	s.pending = 90
	s.run(10, nil)
	ls := s.leaders()
	if len(ls) != 1 {
		t.Fatalf("%d leaders", len(ls))
	}
	old := ls[0]
	oldEpoch := old.c.Snapshot().Epoch
	s.build(old, 0.5, "second") // killed and restarted: no Resign
	for range int(3 * ttl / interval) {
		s.tick()
		ls := s.leaders()
		if len(ls) > 1 {
			t.Fatalf("%d leaders", len(ls))
		}
		if len(ls) == 1 && ls[0].c.Snapshot().Epoch == oldEpoch {
			t.Fatalf("%s leads again in the old term (epoch %d) after a restart", ls[0].id, oldEpoch)
		}
	}
	ls = s.leaders()
	if len(ls) != 1 || ls[0].c.Snapshot().Epoch <= oldEpoch {
		t.Fatalf("after the restart: leaders %d, want one with an epoch above %d", len(ls), oldEpoch)
	}
}

// rejoinFleet is the fleet (issue 27, item 4): capacities 8, 8 and
// 4, a target of 12, split 5/5/2.
func rejoinFleet(t *testing.T) *sim {
	t.Helper()
	s := newSim(t, 8, 8, 4)
	s.run(2, nil)
	s.pending = 120
	s.run(10, nil)
	if got := s.lives(); !slices.Equal(got, []int{5, 5, 2}) || len(s.leaders()) != 1 {
		t.Fatalf("not settled: lives %v, %d leaders, want 5/5/2 and one leader", got, len(s.leaders()))
	}
	return s
}

// TestRejoinKeepsItsWorkers: a host running 5 of the 12 leaves the plan
// (cut off, or a leader paused past the gone time) while its workers run
// on; the others take its share (8 + 4). When it is back, the leader
// counts what it runs: the split ends 5/5/2 again, the 5 workers stopped
// are the others', and the host that came back stops none.
func TestRejoinKeepsItsWorkers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leave func(s *sim) *host
		back  func(s *sim, h *host)
	}{
		{"partitioned follower", func(s *sim) *host {
			for _, h := range s.hosts {
				if !h.c.Snapshot().Leader && h.live == 5 {
					s.store.cut[h.id] = true
					return h
				}
			}
			s.t.Fatal("no follower runs 5")
			return nil
		}, func(s *sim, h *host) { s.store.cut[h.id] = false }},
		{"paused leader", func(s *sim) *host {
			l := s.leaders()[0]
			if l.live != 5 {
				s.t.Fatalf("the leader %s runs %d, want 5", l.id, l.live)
			}
			l.paused = true
			return l
		}, func(s *sim, h *host) { h.paused = false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := rejoinFleet(t)
			h := tc.leave(s)
			// 18 s, as the partition: past the gone time (9 s),
			// and for a leader past its TTL (15 s).
			s.run(int(18*time.Second/interval), nil)
			if _, in := s.leaders()[0].c.Snapshot().Plan.Shares[h.id]; in || h.live != 5 {
				t.Fatalf("while away: %s in the plan %v, runs %d; want out of it, still running 5", h.id, in, h.live)
			}
			if got := s.total(); got != 17 {
				t.Fatalf("while away: lives %v, want the others' 8 + 4 and its 5", s.lives())
			}
			tc.back(s, h)
			stopped, last := 0, s.lives()
			s.run(10, func() {
				for i, o := range s.hosts {
					if o.live > o.capacity {
						t.Fatalf("tick %d: %s runs %d, above its capacity %d", s.ticks, o.id, o.live, o.capacity)
					}
					stopped += max(last[i]-o.live, 0)
				}
				last = s.lives()
				if h.live < 5 {
					t.Fatalf("tick %d: %s, back, runs %d of its 5 (lives %v)", s.ticks, h.id, h.live, s.lives())
				}
				if s.total() < 12 {
					t.Fatalf("tick %d: the total dropped to %d below the target 12: %v", s.ticks, s.total(), s.lives())
				}
			})
			l := s.leaders()
			if len(l) != 1 {
				t.Fatalf("%d leaders after the return", len(l))
			}
			want := map[string]int{"h0": 5, "h1": 5, "h2": 2}
			if got := l[0].c.Snapshot().Plan.Shares; !maps.Equal(got, want) || !slices.Equal(s.lives(), []int{5, 5, 2}) {
				t.Errorf("after the return: plan %v, lives %v; want %v", got, s.lives(), want)
			}
			t.Logf("%s: back, the split is %v, %d workers stopped on the others, none on %s", tc.name, s.lives(), stopped, h.id)
			if stopped != 5 {
				t.Errorf("%d workers stopped on the hosts that took over, want 5", stopped)
			}
		})
	}
}
