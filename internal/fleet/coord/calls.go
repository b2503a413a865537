package coord

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// Calls counts store calls by method: the issue's "store traffic per host
// per tick is O(1)" figure, each call being one round trip by the Store
// contract.
type Calls struct {
	Acquire, Release, Heartbeat, Members, WritePlan, ReadPlan int
}

// Sum is the calls' total.
func (c Calls) Sum() int {
	return c.Acquire + c.Release + c.Heartbeat + c.Members + c.WritePlan + c.ReadPlan
}

func (c Calls) add(d Calls) Calls {
	return Calls{c.Acquire + d.Acquire, c.Release + d.Release, c.Heartbeat + d.Heartbeat,
		c.Members + d.Members, c.WritePlan + d.WritePlan, c.ReadPlan + d.ReadPlan}
}

// counting is the store with its calls counted into *n (the owner's).
type counting struct {
	s fleet.Store
	n *Calls
}

func (c counting) Acquire(ctx context.Context, pool, holder string, epoch uint64, ttl time.Duration) (fleet.Lease, bool, error) {
	c.n.Acquire++
	return c.s.Acquire(ctx, pool, holder, epoch, ttl)
}

func (c counting) Release(ctx context.Context, pool, holder string, epoch uint64) error {
	c.n.Release++
	return c.s.Release(ctx, pool, holder, epoch)
}

func (c counting) Heartbeat(ctx context.Context, pool string, m fleet.Member) error {
	c.n.Heartbeat++
	return c.s.Heartbeat(ctx, pool, m)
}

func (c counting) Members(ctx context.Context, pool string) ([]fleet.Member, time.Time, error) {
	c.n.Members++
	return c.s.Members(ctx, pool)
}

func (c counting) WritePlan(ctx context.Context, pool, holder string, epoch uint64, p fleet.Plan) error {
	c.n.WritePlan++
	return c.s.WritePlan(ctx, pool, holder, epoch, p)
}

func (c counting) ReadPlan(ctx context.Context, pool string) (fleet.Plan, time.Time, error) {
	c.n.ReadPlan++
	return c.s.ReadPlan(ctx, pool)
}
