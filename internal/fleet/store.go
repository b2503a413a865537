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
	// store's clock now.
	ReadPlan(ctx context.Context, pool string) (p Plan, now time.Time, err error)
	Close() error
}
