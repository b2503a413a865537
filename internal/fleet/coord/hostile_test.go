package coord

import (
	"math"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// A writer of the store (issue 27, item 3: every worker of a shared queue
// Redis without an ACL) must not wedge the fleet: each write below is
// made to a steady fleet of three (target 9); the fleet never runs below
// its target because of it, and once the write stops every host applies
// the leader's plans again within TTL + a tick (the fall of a lower epoch
// excepted: it needs the lower lease seen for a TTL).

// applying says whether every host applies the store's current plan: the
// same epoch and time, fresh.
func (s *sim) applying() bool {
	for _, h := range s.hosts {
		st := h.c.Snapshot()
		if h.dead || st.Apply.Phase != fleet.PhaseFresh || st.Plan.Epoch != s.store.plan.Epoch || !st.Plan.At.Equal(s.store.plan.At) {
			return false
		}
	}
	return len(s.leaders()) == 1
}

// recovers ticks until the fleet applies the leader's plans again, within
// bound, checking the total each tick.
func (s *sim) recovers(t *testing.T, what string, target int, bound time.Duration, during func()) time.Duration {
	t.Helper()
	from := s.clk.Now()
	for s.clk.Now().Sub(from) <= bound+interval {
		s.tick()
		if during != nil {
			during()
		}
		if s.total() < target {
			t.Fatalf("%s: the fleet's total dropped to %d (lives %v) at +%s", what, s.total(), s.lives(), s.clk.Now().Sub(from))
		}
		if s.applying() {
			took := s.clk.Now().Sub(from)
			t.Logf("%s: every host applies the leader's plans %s after the write stopped", what, took)
			if took > bound {
				t.Errorf("%s: recovered after %s, want within %s", what, took, bound)
			}
			return took
		}
	}
	var phases []string
	for _, h := range s.hosts {
		st := h.c.Snapshot()
		phases = append(phases, string(st.Apply.Phase)+" "+st.Ignored)
	}
	t.Fatalf("%s: not recovered within %s: phases %q, store plan epoch %d, lease %+v", what, bound, phases, s.store.plan.Epoch, s.store.lease)
	return 0
}

func TestHostileHugeEpoch(t *testing.T) {
	s := steady(t)
	target := s.total()
	s.store.mu.Lock()
	now := s.clk.Now()
	s.store.lease = fleet.Lease{Holder: "evil", Epoch: math.MaxInt64, Expires: now.Add(ttl)}
	s.store.plan = fleet.Plan{Epoch: math.MaxInt64, Target: target, Shares: s.store.plan.Shares, At: now}
	s.store.mu.Unlock()
	s.run(3, func() {
		if s.total() < target {
			t.Fatalf("total %d below %d under the huge epoch", s.total(), target)
		}
	})
	// The writer deletes its keys: nothing of it may remain. The next
	// lease starts again from 1 (PostgreSQL's new row does).
	s.store.mu.Lock()
	s.store.lease, s.store.plan, s.store.counter, s.store.forget = fleet.Lease{}, fleet.Plan{}, 0, true
	s.store.mu.Unlock()
	s.recovers(t, "huge epoch, then deleted", target, ttl+interval, nil)
}

func TestHostileFuturePlan(t *testing.T) {
	s := steady(t)
	target := s.total()
	s.store.mu.Lock()
	p := s.store.plan
	p.At = p.At.Add(time.Hour)
	// Every host's share to 0: applied, the fleet would stop.
	p.Shares = map[string]int{"h0": 0, "h1": 0, "h2": 0}
	s.store.plan = p
	s.store.mu.Unlock()
	// The followers read it before the leader writes again.
	l := s.leaders()[0]
	l.paused = true
	s.tick()
	l.paused = false
	if s.total() < target {
		t.Fatalf("the followers applied the future plan: total %d (lives %v), want %d", s.total(), s.lives(), target)
	}
	s.recovers(t, "a plan dated an hour ahead", target, 2*interval, nil)
}

func TestHostileStoreClockBack(t *testing.T) {
	s := steady(t)
	target := s.total()
	s.store.mu.Lock()
	s.store.offset = -time.Hour
	s.store.mu.Unlock()
	s.recovers(t, "the store's clock an hour back", target, 2*interval, nil)
}

// The store lost everything and the host that takes the lease first knew
// none of it (a restarted daemon, or a store that ignores the known
// epoch): the epoch falls; the hosts accept it once the store has shown
// the lower lease for a TTL.
func TestStoreLostDataLowerEpoch(t *testing.T) {
	s := steady(t)
	target := s.total()
	// Epochs well above 1 first: a few terms.
	s.store.mu.Lock()
	s.store.counter = 40
	s.store.mu.Unlock()
	s.store.loseLease()
	s.run(3, nil)
	if e := s.leaders()[0].c.Snapshot().Epoch; e <= 40 {
		t.Fatalf("the leader's epoch %d, want above 40", e)
	}
	s.store.mu.Lock()
	s.store.lease, s.store.plan, s.store.counter, s.store.forget = fleet.Lease{}, fleet.Plan{}, 0, true
	s.store.mu.Unlock()
	s.recovers(t, "a store that lost its data", target, ttl+renew*6/5+3*interval, nil)
}

// A member that says it runs MaxInt64 workers (and drains as many) must
// not overflow the fleet's sums into another target.
func TestHostileMemberCounts(t *testing.T) {
	s := steady(t)
	target := s.total()
	evil := func() {
		s.store.mu.Lock()
		s.store.members["evil"] = fleet.Member{ID: "evil", Capacity: 0, Live: math.MaxInt64, Starting: math.MaxInt64, Draining: math.MaxInt64, SeenAt: s.clk.Now()}
		s.store.mu.Unlock()
	}
	evil()
	s.run(6, func() {
		evil()
		if s.total() < target {
			t.Fatalf("total %d below %d with a member of MaxInt64 workers", s.total(), target)
		}
		if st := s.leaders()[0].c.Snapshot(); st.Plan.Target != target {
			t.Fatalf("the plan's target %d, want %d", st.Plan.Target, target)
		}
	})
}

// A dead host whose last heartbeat is dated in the store's future: it is
// judged from when the leader first saw that heartbeat, so it is gone
// after GoneBeats heartbeats, and its share moves to the live hosts.
func TestHostileFutureSeenAt(t *testing.T) {
	s := steady(t)
	target := s.total()
	dead := s.hosts[2]
	if dead.c.Snapshot().Leader {
		dead = s.hosts[1]
	}
	dead.dead = true
	s.store.mu.Lock()
	m := s.store.members[dead.id]
	m.SeenAt = s.clk.Now().Add(24 * time.Hour)
	s.store.members[dead.id] = m
	s.store.mu.Unlock()
	s.run(int(fleet.GoneAfter(interval)/interval)+3, nil)
	st := s.leaders()[0].c.Snapshot()
	if _, in := st.Plan.Shares[dead.id]; in {
		t.Fatalf("the dead host %s is still in the plan %v after %d ticks: a future heartbeat keeps it alive", dead.id, st.Plan.Shares, s.ticks)
	}
	live := 0
	for _, h := range s.hosts {
		if !h.dead {
			live += h.live
		}
	}
	if live < target {
		t.Errorf("the live hosts run %d, want the target %d", live, target)
	}
}

// A member entry this daemon cannot read (`{"v":2}`: a newer version
// during a rolling upgrade, or a hostile write) is skipped: the leader
// decides on, and names it in the journal once per episode.
func TestUnreadableMemberNamedOnce(t *testing.T) {
	s := steady(t)
	target := s.total()
	l := s.leaders()[0]
	bad := func(on bool) {
		s.store.mu.Lock()
		defer s.store.mu.Unlock()
		if on {
			s.store.members["v2"] = fleet.Member{ID: "v2", Invalid: "encoding version 2, this flexiq-scaled reads 1", SeenAt: s.clk.Now()}
		} else {
			delete(s.store.members, "v2")
		}
	}
	episode := func() {
		t.Helper()
		bad(true)
		at := s.store.plan.At
		s.run(5, nil)
		if !s.store.plan.At.After(at) || s.store.plan.Target != target || s.total() < target {
			t.Fatalf("with an unreadable member: plan %+v (last at %s), total %d: the leader must decide on", s.store.plan, at, s.total())
		}
		bad(false)
		s.run(2, nil)
	}
	episode()
	episode()
	var named []Event
	for _, e := range l.events {
		if e.Kind == MemberUnreadable {
			named = append(named, e)
		}
	}
	if len(named) != 2 || named[0].Member != "v2" || named[0].Err == nil {
		t.Errorf("member-unreadable events %+v, want one per episode (2) naming v2 with why", named)
	}
}
