package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// lead is the leader's tick: the members, the source read once, the
// decision on the fleet's totals, and the plan written fenced by the
// epoch, every tick (Plan.At is the followers' sign of a live leader).
func (c *Coordinator) lead(ctx context.Context, now time.Time) {
	st := &c.st
	if st.needPrev && !c.readPrev(ctx, now) {
		return
	}
	ms, storeNow, err := c.members(ctx, now)
	if err != nil {
		return
	}
	st.skew = storeNow.Sub(now)
	live := fleet.LiveMembers(ms, storeNow, fleet.GoneAfter(c.cfg.Interval))
	st.members, st.hosts = live, len(live)
	plan, ok := c.decide(ctx, storeNow, live)
	if !ok {
		return
	}
	err = c.call(ctx, func(ctx context.Context) error {
		return c.store.WritePlan(ctx, c.cfg.Pool, c.cfg.Holder(), st.epoch, plan)
	})
	switch {
	case errors.Is(err, fleet.ErrFenced):
		c.stepDown(now, ReasonFenced, err)
	case err == nil:
		st.prev = plan
		c.observe(plan, plan.At, now)
	}
}

// decide is the tick's plan: the pipeline's decision when the source
// answers, else the last plan's target split again over the live hosts
// (so that a gone host's share still moves, and the plan stays fresh),
// else nothing to write (no plan yet: the followers fall back).
func (c *Coordinator) decide(ctx context.Context, storeNow time.Time, live []fleet.Member) (fleet.Plan, bool) {
	st := &c.st
	totals := fleet.Sum(live)
	in, err := c.deps.Source(ctx, storeNow, totals)
	if err != nil {
		st.sourceErr = fmt.Errorf("fleet pool %s: the leader's source read: %w", c.cfg.Pool, err)
		if st.prev.Epoch == 0 {
			return fleet.Plan{}, false
		}
		p := st.prev
		p.Epoch, p.At = st.epoch, storeNow
		p.Shares = fleet.Split(p.Target, fleet.Hosts(live), st.prev.Shares)
		return p, true
	}
	d, err := fleet.Decide(c.pipe.Load(), fleet.Tick{
		Now: storeNow, Epoch: st.epoch, Params: in.Params, Obs: in.Obs,
		Signals: in.Signals, Prom: in.Prom, Members: live, Prev: st.prev,
	})
	if errors.Is(err, fleet.ErrFenced) {
		c.stepDown(c.deps.Now(), ReasonFenced, err)
		return fleet.Plan{}, false
	}
	if err != nil {
		st.sourceErr = fmt.Errorf("fleet pool %s: the leader's decision: %w", c.cfg.Pool, err)
		return fleet.Plan{}, false
	}
	st.result, st.stateErr = d.Result, d.StateErr
	return d.Plan, true
}
