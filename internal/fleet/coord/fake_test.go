package coord

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

var errDown = errors.New("fake store: unreachable")

// fakeClock is the tests' shared time: it moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

// write is one WritePlan call as the fake store saw it.
type write struct {
	At       time.Time
	Holder   string
	Epoch    uint64
	Accepted bool
}

// fakeStore is fleet.Store in memory, with the real stores' semantics
// (redisstore and pgstore package docs): renewal matches holder AND epoch,
// an acquisition's epoch exceeds the counter, the plan's and the caller's,
// a plan is written only under the live lease and never over a later
// epoch; every time is the store's clock. Faults: down (every call
// fails), cut (one host's calls fail), delay (a host's calls take time,
// advancing the shared clock).
type fakeStore struct {
	mu      sync.Mutex
	clk     *fakeClock
	down    bool
	cut     map[string]bool
	delay   map[string]time.Duration
	lease   fleet.Lease
	counter uint64
	plan    fleet.Plan
	members map[string]fleet.Member
	writes  []write
	leases  []fleet.Lease // every acquisition, in order
	// offset moves the store's clock from the shared one (a store whose
	// clock stepped); forget makes an acquisition ignore the caller's
	// known epoch (a store that lost its data, met by a host that knew
	// nothing).
	offset time.Duration
	forget bool
}

// now is the store's clock; the caller holds mu.
func (s *fakeStore) now() time.Time { return s.clk.Now().Add(s.offset) }

func newFakeStore(clk *fakeClock) *fakeStore {
	return &fakeStore{clk: clk, cut: map[string]bool{}, delay: map[string]time.Duration{}, members: map[string]fleet.Member{}}
}

// as is the store as host id reaches it (for cut and delay).
func (s *fakeStore) as(id string) fleet.Store { return hostStore{s, id} }

// enter applies the faults for host id; the caller holds no lock.
func (s *fakeStore) enter(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clk.Advance(s.delay[id])
	if s.down || s.cut[id] {
		return errDown
	}
	return nil
}

func (s *fakeStore) loseLease() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lease.Holder, s.lease.Expires = "", s.now()
}

type hostStore struct {
	s  *fakeStore
	id string
}

func (h hostStore) Acquire(ctx context.Context, pool, holder string, epoch uint64, ttl time.Duration) (fleet.Lease, bool, error) {
	if err := h.s.enter(h.id); err != nil {
		return fleet.Lease{}, false, err
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	live := s.lease.Holder != "" && now.Before(s.lease.Expires)
	switch {
	case live && s.lease.Holder == holder && s.lease.Epoch == epoch:
		s.lease.Expires = now.Add(ttl)
		return s.lease, true, nil
	case live:
		return s.lease, false, nil
	}
	if s.forget {
		epoch = 0
	}
	s.counter = max(s.counter, s.plan.Epoch, epoch) + 1
	s.lease = fleet.Lease{Holder: holder, Epoch: s.counter, Expires: now.Add(ttl)}
	s.leases = append(s.leases, s.lease)
	return s.lease, true, nil
}

func (h hostStore) Release(ctx context.Context, pool, holder string, epoch uint64) error {
	if err := h.s.enter(h.id); err != nil {
		return err
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease.Holder == holder && s.lease.Epoch == epoch {
		s.lease.Holder, s.lease.Expires = "", s.now()
	}
	return nil
}

func (h hostStore) Heartbeat(ctx context.Context, pool string, m fleet.Member) error {
	if err := h.s.enter(h.id); err != nil {
		return err
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	m.SeenAt = h.s.now()
	h.s.members[m.ID] = m
	return nil
}

func (h hostStore) Members(ctx context.Context, pool string) ([]fleet.Member, time.Time, error) {
	if err := h.s.enter(h.id); err != nil {
		return nil, time.Time{}, err
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return slices.Collect(maps.Values(h.s.members)), h.s.now(), nil
}

func (h hostStore) WritePlan(ctx context.Context, pool, holder string, epoch uint64, p fleet.Plan) error {
	if err := h.s.enter(h.id); err != nil {
		return err
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	ok := s.lease.Holder == holder && s.lease.Epoch == epoch && now.Before(s.lease.Expires) && s.plan.Epoch <= epoch
	s.writes = append(s.writes, write{At: now, Holder: holder, Epoch: epoch, Accepted: ok})
	if !ok {
		return fleet.ErrFenced
	}
	p.Epoch, p.At, p.Shares = epoch, now, maps.Clone(p.Shares)
	s.plan = p
	return nil
}

func (h hostStore) ReadPlan(ctx context.Context, pool string) (fleet.Plan, time.Time, error) {
	if err := h.s.enter(h.id); err != nil {
		return fleet.Plan{}, time.Time{}, err
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	p := h.s.plan
	p.Shares = maps.Clone(p.Shares)
	return p, h.s.now(), nil
}

func (h hostStore) Close() error { return nil }
