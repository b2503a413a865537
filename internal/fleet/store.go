// Package fleet coordinates one pool across many hosts (issue 20): one
// leader per pool, elected by a lease in the store the queue already lives
// in (Redis or PostgreSQL), decides the fleet's target once per tick and
// splits it across the live hosts; every host applies its own share.
//
// This file is the contract between the planner (pure: plan.go and
// friends) and the stores (redisstore, pgstore), which implement Store
// against the real servers.
package fleet

import (
	"context"
	"errors"
	"time"
)

// ErrFenced is returned by Store.WritePlan when the epoch given is not the
// current lease's: the writer has lost the lease (a paused leader that came
// back, River #197, Oban #1488), and its plan must not land.
var ErrFenced = errors.New("fleet: the lease has another epoch: plan refused")

// MaxEpoch bounds every epoch: 2^53, the largest integer a Lua number (a
// double, as Redis's scripts count) holds exactly. No fleet gets near it
// (an acquisition a second for 285 million years); an epoch above it, or
// 0, in the store is garbage (a hostile or corrupt write, issue 27): the
// stores take such a lease over and report such a plan as unreadable, and
// the hosts never remember one as the highest seen, so that it cannot
// hold the fleet once it is gone.
const MaxEpoch = 1 << 53

// ValidEpoch says whether e is an epoch a store gives: 1 to MaxEpoch.
func ValidEpoch(e uint64) bool { return e >= 1 && e <= MaxEpoch }

// ErrBadPlan is returned (wrapped, with why) by Store.ReadPlan when the
// stored plan cannot be used: it does not decode (another version's
// encoding, a corrupt or hostile write), its epoch is garbage, or it is
// above the lease's (no leader wrote it). The store's clock is returned
// with it: the store answered. A follower ignores such a plan; a new
// leader starts from no plan and overwrites it.
var ErrBadPlan = errors.New("fleet: the stored plan is unusable")

// FutureSlack is how far in the store's future a plan's time or a
// heartbeat may lie and still count as written now: the store's own
// clock, read a moment apart (a replica's, a statement's start). Beyond
// it the time is not trusted (a hostile write, or the store's clock
// stepped back since).
const FutureSlack = time.Second

// Lease is a pool's leadership as the store holds it. Times are the
// store's clock, never the host's.
type Lease struct {
	Holder  string    // the host id (/etc/machine-id) of the leader; "" = none
	Epoch   uint64    // increments at every acquisition, never decreases
	Expires time.Time // the store's clock
}

// Member is one host's heartbeat for a pool.
type Member struct {
	ID       string // /etc/machine-id
	Capacity int    // workers this host can hold for the pool
	Live     int
	Starting int
	Draining int
	Version  string
	// SeenAt is when the store recorded the heartbeat, on its clock; a
	// host silent for about 3 heartbeats is gone (the planner decides).
	SeenAt time.Time
	// Invalid says why the store's entry for ID could not be read (a
	// newer encoding during a rolling upgrade, a corrupt or hostile
	// write): such a member is not live, and the coordinator names it in
	// the journal once. "" for a member read whole.
	Invalid string
}

// Plan is the leader's decision for a pool: the fleet's target and each
// host's share, written fenced by the lease's epoch.
type Plan struct {
	Epoch  uint64
	Target int
	Shares map[string]int // by host id
	// At is when the plan was written, on the store's clock.
	At time.Time
	// State is the decision pipeline's window history, opaque to the
	// store, so that a new leader continues the old one's windows.
	State []byte
}

// Store is a coordination store for fleets. Every method is one round
// trip (a command, a script, or one transaction) so that a host's traffic
// per tick is O(1). Implementations are safe for concurrent use.
type Store interface {
	// Acquire takes the pool's lease for holder if it is free or expired,
	// or renews it if holder holds it, for ttl; it returns the lease as
	// it stands after the call and whether holder holds it. A new
	// acquisition increments the epoch; a renewal keeps it. Renewal
	// matches holder AND epoch: a holder that lost the lease in between
	// cannot renew the new one.
	Acquire(ctx context.Context, pool, holder string, epoch uint64, ttl time.Duration) (Lease, bool, error)
	// Release gives the lease up if holder still holds it with epoch
	// (a clean stop): another host may take it at once.
	Release(ctx context.Context, pool, holder string, epoch uint64) error
	// Heartbeat records m for the pool, on the store's clock.
	Heartbeat(ctx context.Context, pool string, m Member) error
	// Members lists the pool's members with their SeenAt, and the store's
	// clock now, so that the caller can age them without its own clock.
	Members(ctx context.Context, pool string) (members []Member, now time.Time, err error)
	// WritePlan stores p if epoch is the pool's current lease epoch and
	// holder holds it, in the same transaction or script that checks it;
	// else it returns ErrFenced and changes nothing.
	WritePlan(ctx context.Context, pool, holder string, epoch uint64, p Plan) error
	// ReadPlan returns the pool's last plan (Epoch 0 when none) and the
	// store's clock now; a plan that cannot be used is ErrBadPlan, with
	// the store's clock.
	ReadPlan(ctx context.Context, pool string) (p Plan, now time.Time, err error)
	Close() error
}
