package coord

import (
	"context"
	"errors"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// Step runs one tick (see the package doc) and publishes its status. Owner
// only. After Resign it only returns the last status.
func (c *Coordinator) Step(ctx context.Context) *Status {
	st := &c.st
	if st.stopped {
		return c.pub.Load()
	}
	now := c.deps.Now()
	st.ticks++
	st.calls, st.firstErr, st.sourceErr = Calls{}, nil, nil
	self := c.deps.Self()
	if !st.started {
		st.started = true
		st.last = c.cfg.Initial
		if st.last < 0 {
			st.last = max(self.Live, 0)
		}
	}
	c.heartbeat(ctx, self)
	c.lease(ctx, now)
	if st.leading {
		c.lead(ctx, now)
	} else {
		c.follow(ctx, now)
	}
	hosts := max(st.hosts, 1)
	a := c.view.Target(now, fleet.StaleParams{TTL: c.cfg.TTL, Hold: c.cfg.Hold, MinWorkers: c.cfg.MinWorkers, Capacity: self.Capacity},
		st.last, st.firstErr == nil, hosts)
	st.last = a.Target
	st.total = st.total.add(st.calls)
	c.episodes(now, a)
	return c.publish(now, a)
}

// call runs one store call with the call timeout.
func (c *Coordinator) call(ctx context.Context, f func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	err := f(cctx)
	// A call cut short by the caller's stop is no failure of the store.
	if err != nil && !errors.Is(err, fleet.ErrFenced) && ctx.Err() == nil && c.st.firstErr == nil {
		c.st.firstErr = err
	}
	return err
}

func (c *Coordinator) heartbeat(ctx context.Context, m fleet.Member) {
	m.ID, m.SeenAt = c.cfg.ID, time.Time{}
	_ = c.call(ctx, func(ctx context.Context) error { return c.store.Heartbeat(ctx, c.cfg.Pool, m) })
}

// acquireDue says whether this tick takes or renews the lease.
func (c *Coordinator) acquireDue(now time.Time) bool {
	st := &c.st
	woken := c.wakeReq.Swap(false)
	if st.leading || !now.Before(st.nextAcq) {
		return !now.Before(st.nextAcq)
	}
	expired := st.lease.Epoch != 0 && !now.Add(st.skew).Before(st.lease.Expires)
	return woken || expired || st.lease.Holder == "" || c.view.Age(now) > c.cfg.TTL
}

// jittered is the next renewal's delay: Renew ± Jitter×Renew.
func (c *Coordinator) jittered() time.Duration {
	f := 1 + c.cfg.Jitter*(2*c.deps.Rand()-1)
	return time.Duration(float64(c.cfg.Renew) * f)
}

// lease takes, renews or loses the lease.
func (c *Coordinator) lease(ctx context.Context, now time.Time) {
	st := &c.st
	if st.leading && now.Sub(st.renewedAt) >= c.cfg.TTL {
		// Not renewed for a TTL on its own clock (paused, or the store
		// silent): another host may lead now.
		c.stepDown(now, ReasonExpired, st.firstErr)
	}
	if !c.acquireDue(now) {
		return
	}
	st.nextAcq = now.Add(c.jittered())
	epoch := c.view.Highest()
	if st.leading {
		epoch = st.epoch
	}
	var l fleet.Lease
	var held bool
	err := c.call(ctx, func(ctx context.Context) (err error) {
		l, held, err = c.store.Acquire(ctx, c.cfg.Pool, c.cfg.Holder(), epoch, c.cfg.TTL)
		return err
	})
	if err != nil {
		// A leader leads on until its lease lapses on its clock, and
		// tries again at the next tick rather than a renewal later.
		if st.leading {
			st.nextAcq = now
		}
		return
	}
	st.lease = l
	c.view.NoteLease(l.Epoch, now, c.cfg.TTL)
	switch {
	case held && st.leading && l.Epoch == st.epoch:
		st.renewedAt = now
	case held:
		if st.leading { // lost and taken again: a new term
			c.stepDown(now, ReasonExpired, nil)
		}
		c.gain(ctx, now, l)
	case st.leading:
		c.stepDown(now, ReasonFenced, nil)
	}
}

// gain starts a term at lease l, taken at now (host clock, as sent).
func (c *Coordinator) gain(ctx context.Context, now time.Time, l fleet.Lease) {
	st := &c.st
	st.leading, st.epoch, st.renewedAt = true, l.Epoch, now
	st.prev, st.needPrev = fleet.Plan{}, true
	c.deps.Events.Event(Event{Kind: LeaderGained, Pool: c.cfg.Pool, Epoch: l.Epoch, At: now})
	c.readPrev(ctx, now)
}

// readPrev reads the old leader's plan, whose windows and split the new
// term continues; until it is read, the leader does not decide.
func (c *Coordinator) readPrev(ctx context.Context, now time.Time) bool {
	st := &c.st
	var p fleet.Plan
	var storeNow time.Time
	err := c.readPlan(ctx, &p, &storeNow)
	if err != nil {
		return false
	}
	st.skew = storeNow.Sub(now)
	c.observe(p, storeNow, now)
	st.prev, st.needPrev = p, false
	return true
}

// stepDown ends the term at once: no write with its epoch follows.
func (c *Coordinator) stepDown(now time.Time, why Reason, err error) {
	st := &c.st
	if !st.leading {
		return
	}
	st.leading, st.prev, st.members = false, fleet.Plan{}, nil
	c.deps.Events.Event(Event{Kind: LeaderLost, Pool: c.cfg.Pool, Epoch: st.epoch, Reason: why, Err: err, At: now})
}

func (c *Coordinator) observe(p fleet.Plan, storeNow, now time.Time) {
	if ok, why := c.view.Observe(p, storeNow, now); !ok && p.Epoch != 0 {
		c.st.ignored = why
	} else if ok {
		c.st.ignored = ""
	}
}

// follow reads the leader's plan.
func (c *Coordinator) follow(ctx context.Context, now time.Time) {
	var p fleet.Plan
	var storeNow time.Time
	if err := c.readPlan(ctx, &p, &storeNow); err != nil {
		return
	}
	c.st.skew = storeNow.Sub(now)
	c.observe(p, storeNow, now)
	if _, have := c.view.Plan(); !have {
		c.countHosts(ctx)
	}
}

// readPlan reads the plan into p and the store's clock into storeNow. A
// plan the store holds but that cannot be used (fleet.ErrBadPlan: another
// version's, a garbage epoch, a hostile write) is no failure of the store:
// it reads as no plan, ignored with the reason, so that a new leader
// starts afresh and overwrites it, and a follower holds what it has.
func (c *Coordinator) readPlan(ctx context.Context, p *fleet.Plan, storeNow *time.Time) error {
	var bad error
	err := c.call(ctx, func(ctx context.Context) (err error) {
		*p, *storeNow, err = c.store.ReadPlan(ctx, c.cfg.Pool)
		if errors.Is(err, fleet.ErrBadPlan) {
			bad, err = err, nil
		}
		return err
	})
	if bad != nil {
		*p = fleet.Plan{}
		c.st.ignored = bad.Error()
	}
	return err
}

// members reads the pool's members, and judges them: a heartbeat dated in
// the store's future counts from when it was first read, and an entry the
// store could not read is named in the journal, once while it stays so.
func (c *Coordinator) members(ctx context.Context, now time.Time) ([]fleet.Member, time.Time, error) {
	var ms []fleet.Member
	var storeNow time.Time
	err := c.call(ctx, func(ctx context.Context) (err error) {
		ms, storeNow, err = c.store.Members(ctx, c.cfg.Pool)
		return err
	})
	if err != nil {
		return nil, storeNow, err
	}
	st := &c.st
	bad := map[string]bool{}
	for _, m := range ms {
		if m.Invalid == "" {
			continue
		}
		bad[m.ID] = true
		if !st.badMembers[m.ID] {
			c.deps.Events.Event(Event{Kind: MemberUnreadable, Pool: c.cfg.Pool, Member: m.ID, Err: errors.New(m.Invalid), At: now})
		}
	}
	st.badMembers = bad
	return st.sightings.Judge(ms, storeNow), storeNow, nil
}

// countHosts counts the live members, for the fallback's share of
// min_workers before any plan (one more call a tick, only then).
func (c *Coordinator) countHosts(ctx context.Context) {
	ms, storeNow, err := c.members(ctx, c.deps.Now())
	if err == nil {
		c.st.hosts = len(fleet.LiveMembers(ms, storeNow, fleet.GoneAfter(c.cfg.Interval)))
	}
}
