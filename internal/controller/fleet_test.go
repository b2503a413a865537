package controller

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	fleetmode "github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/fleet/coord"
)

// memStore is a fleet store in memory with the real stores' rules that the
// pool relies on (renewal by holder and epoch, plans fenced by the epoch,
// the store's clock), on the real clock: the coordinators run their own
// goroutines, as in the daemon. The stores' own semantics are tested
// against the real servers (test/e2e TestFleetRedisStore, TestFleetPgStore).
type memStore struct {
	mu      sync.Mutex
	lease   fleetmode.Lease
	plan    fleetmode.Plan
	members map[string]fleetmode.Member
	writes  map[string]int // plans written, by holder
}

func newMemStore() *memStore {
	return &memStore{members: map[string]fleetmode.Member{}, writes: map[string]int{}}
}

func (s *memStore) Acquire(_ context.Context, _, holder string, epoch uint64, ttl time.Duration) (fleetmode.Lease, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	switch {
	case s.lease.Holder == holder && s.lease.Epoch == epoch && now.Before(s.lease.Expires):
		s.lease.Expires = now.Add(ttl)
	case s.lease.Holder == "" || !now.Before(s.lease.Expires):
		s.lease = fleetmode.Lease{Holder: holder, Epoch: max(s.lease.Epoch, s.plan.Epoch, epoch) + 1, Expires: now.Add(ttl)}
	}
	return s.lease, s.lease.Holder == holder, nil
}

func (s *memStore) Release(_ context.Context, _, holder string, epoch uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease.Holder == holder && s.lease.Epoch == epoch {
		s.lease.Holder, s.lease.Expires = "", time.Time{}
	}
	return nil
}

func (s *memStore) Heartbeat(_ context.Context, _ string, m fleetmode.Member) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.SeenAt = time.Now()
	s.members[m.ID] = m
	return nil
}

func (s *memStore) Members(context.Context, string) ([]fleetmode.Member, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.members)), time.Now(), nil
}

func (s *memStore) WritePlan(_ context.Context, _, holder string, epoch uint64, p fleetmode.Plan) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease.Holder != holder || s.lease.Epoch != epoch || !time.Now().Before(s.lease.Expires) {
		return fleetmode.ErrFenced
	}
	p.At = time.Now()
	s.plan = p
	s.writes[holder]++
	return nil
}

func (s *memStore) ReadPlan(context.Context, string) (fleetmode.Plan, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.plan, time.Now(), nil
}

func (s *memStore) Close() error { return nil }

func (s *memStore) member(id string) fleetmode.Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.members[id]
}

func (s *memStore) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return coord.HostOf(s.lease.Holder)
}

// fleetRig is one host of a fleet: a rig whose pool joins the fleet on
// the shared store.
func fleetRig(t *testing.T, store *memStore, host string, capacity int) *rig {
	cfg := testPool("bulk")
	cfg.MinWorkers, cfg.MaxWorkers = 2, 30
	cfg.ScaleDownWindow = 0
	cfg.Fleet = &config.PoolFleet{Capacity: capacity, Fleet: config.Fleet{
		HostID: host, TTL: 600 * time.Millisecond, Heartbeat: 100 * time.Millisecond,
		Renew: 200 * time.Millisecond, Hold: 1200 * time.Millisecond,
	}}
	r := &rig{t: t, sd: newFakeSystemd(), src: &fakeSource{}, clock: &fakeClock{now: monoTime(1000 * time.Hour)}, log: &syncBuffer{}, cfg: cfg, dir: t.TempDir()}
	r.tweak = func(o *Options) {
		o.OpenFleetStore = func(config.Fleet) (fleetmode.Store, error) { return store, nil }
	}
	// Units go at once when stopped: drains are tested elsewhere.
	r.sd.stopNow = true
	r.pool = r.newPool()
	r.start(r.pool)
	t.Cleanup(func() { r.pool.Close() })
	return r
}

// converge ticks every host's pool until each runs want[i] workers, or
// (want of one element) until they run want[0] in all.
func converge(t *testing.T, hosts []*rig, want []int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got []int
		total := 0
		for _, h := range hosts {
			h.tick(time.Second)
			got = append(got, h.sd.count("active", "activating"))
			total += got[len(got)-1]
		}
		if slices.Equal(got, want) || (len(want) == 1 && total == want[0]) {
			return
		}
		if time.Now().After(deadline) {
			for _, h := range hosts {
				v := h.pool.View()
				t.Logf("%s: %+v %+v", h.cfg.Fleet.HostID, v.Workers, v.Fleet)
				if v.LastDecision != nil {
					t.Logf("  %s %+v", v.LastDecision.Rationale, v.LastDecision.Steps)
				}
			}
			t.Fatalf("%s: hosts run %v, want %v", what, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The fleet's pools apply the leader's split of one decision on the
// fleet's totals: 200 pending at 10 per worker is 20 workers for the whole
// fleet, not 20 per host; a host is never above its capacity; a leader
// that stops hands its lease over and its share moves before it drains.
func TestFleetPoolsApplyOneDecision(t *testing.T) {
	store := newMemStore()
	a := fleetRig(t, store, "host-a", 12)
	b := fleetRig(t, store, "host-b", 12)
	hosts := []*rig{a, b}
	// Before any work: min_workers 2 is the fleet's, not each host's.
	converge(t, hosts, []int{2}, "min_workers for the fleet")
	for _, h := range hosts {
		h.src.set(200, 0, nil)
	}
	converge(t, hosts, []int{10, 10}, "the fleet's 20 split")

	leader, other := a, b
	if store.holder() == "host-b" {
		leader, other = b, a
	}
	v := leader.pool.View()
	if v.Fleet == nil || !v.Fleet.IsLeader || v.Fleet.Target != 20 || v.Fleet.Share != 10 || len(v.Fleet.Hosts) != 2 {
		t.Fatalf("the leader's status: %+v", v.Fleet)
	}
	if fv := other.pool.View().Fleet; fv == nil || fv.IsLeader || fv.Leader != leader.cfg.Fleet.HostID || fv.Phase != "fresh" {
		t.Fatalf("the follower's status: %+v", fv)
	}
	// The follower's snapshot knows the leader's share, not its counts;
	// status completes them from the members, and leaves the snapshot be.
	// (The counts are the last heartbeats': a tick or two behind.)
	want := []api.FleetHost{{ID: "host-a", Share: 10, Live: 10, Capacity: 12}, {ID: "host-b", Share: 10, Live: 10, Capacity: 12}}
	var ov, full api.View
	for deadline := time.Now().Add(5 * time.Second); ; {
		ov = other.pool.View()
		full = other.pool.WithFleetMembers(context.Background(), ov)
		if slices.Equal(full.Fleet.Hosts, want) && full.Fleet.MembersError == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower's status with the members: %+v (%q), want %+v", full.Fleet.Hosts, full.Fleet.MembersError, want)
		}
		for _, h := range hosts {
			h.tick(time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if i := slices.IndexFunc(ov.Fleet.Hosts, func(h api.FleetHost) bool { return h.ID == leader.cfg.Fleet.HostID }); i < 0 || ov.Fleet.Hosts[i].Live != -1 {
		t.Errorf("the follower's snapshot was written into: %+v", ov.Fleet.Hosts)
	}
	// A store that did not answer the last tick is not asked again.
	down := *ov.Fleet
	down.Reachable = false
	dv := ov
	dv.Fleet = &down
	if got := other.pool.WithFleetMembers(context.Background(), dv).Fleet; !strings.Contains(got.MembersError, "did not answer") || slices.Equal(got.Hosts, want) {
		t.Errorf("the follower's status with the store down: %+v (%q)", got.Hosts, got.MembersError)
	}
	if lv := leader.pool.View(); !reflect.DeepEqual(leader.pool.WithFleetMembers(context.Background(), lv), lv) {
		t.Errorf("the leader's status was completed: it knows the members already")
	}
	// Above one host's capacity: 300 pending is 30, capped at 12 + 12.
	for _, h := range hosts {
		h.src.set(300, 0, nil)
	}
	converge(t, hosts, []int{12, 12}, "capped at capacity")
	for _, h := range hosts {
		h.src.set(200, 0, nil)
	}
	converge(t, hosts, []int{10, 10}, "back to 20")

	// The leader stops: its share moves to the other host (12 at most)
	// before its workers drain, and the other host leads.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			other.tick(time.Second)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	leader.pool.Drain(ctx, "daemon stopping")
	if n := leader.sd.count("active", "activating", "deactivating"); n != 0 || ctx.Err() != nil {
		t.Fatalf("the stopping host still has %d units (%v)", n, ctx.Err())
	}
	if n := other.sd.count("active", "activating"); n != 12 {
		t.Errorf("after the leader's stop the other host runs %d, want its capacity 12 (the share moved before the drain)", n)
	}
	leader.pool.Close()
	deadlineLead := time.Now().Add(5 * time.Second)
	for store.holder() != other.cfg.Fleet.HostID && time.Now().Before(deadlineLead) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if h := store.holder(); h != other.cfg.Fleet.HostID {
		t.Fatalf("after the leader resigned the lease is %q's", h)
	}
	if got := leader.lines("took this host's share over"); len(got) != 1 {
		t.Errorf("the stopping host's journal on the hand-over: %q", got)
	}
	if got := leader.lines("no longer leading", "resigned: the pool stopped (daemon stopping)"); len(got) != 1 {
		t.Errorf("the stopping leader's journal on resigning: %q\n%s", got, leader.log)
	}
	// Issue 27: the stopped host's member says what it runs now, nothing,
	// not the 10 of its last tick (status lists it until it ages out).
	if m := store.member(leader.cfg.Fleet.HostID); m.Live != 0 || m.Starting != 0 || m.Draining != 0 || m.Capacity != 0 {
		t.Errorf("the stopped host's member in the store: %+v, want no workers and no capacity", m)
	}
}

// A reload that changes the fleet's store resigns the old coordinator's
// lease; the journal says so, not that the daemon stopped (issue 27), and
// the new store is joined at once.
func TestFleetReloadResignsForTheStore(t *testing.T) {
	first, second := newMemStore(), newMemStore()
	r := fleetRig(t, first, "host-a", 12)
	r.tweak = nil
	r.src.set(50, 0, nil)
	converge(t, []*rig{r}, []int{5}, "alone in the first store")
	if h := first.holder(); h != "host-a" {
		t.Fatalf("the first store's lease is %q's", h)
	}
	cfg := *r.cfg
	fl := *cfg.Fleet
	fl.Conn.URL = "redis://other.example:6379/0"
	cfg.Fleet = &fl
	r.pool.opts.OpenFleetStore = func(config.Fleet) (fleetmode.Store, error) { return second, nil }
	if err := r.pool.Update(&cfg); err != nil {
		t.Fatal(err)
	}
	got := r.lines("no longer leading", "resigned")
	if len(got) != 1 || !strings.Contains(got[0], "a reload changed the fleet's store") || strings.Contains(got[0], "daemon's stop") {
		t.Errorf("the journal on the reload's resignation: %q", got)
	}
	if h := first.holder(); h != "" {
		t.Errorf("after the reload the first store's lease is still %q's", h)
	}
	converge(t, []*rig{r}, []int{5}, "alone in the second store")
	// The new coordinator takes its lease off the loop, and the pool
	// already runs its 5: converge can return before the lease is taken.
	waitFor(t, "lease of the second store held by host-a", func() bool { return second.holder() == "host-a" })
}
