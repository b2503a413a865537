package wake

import (
	"context"
	"time"
)

// wakeLocked asks the pool to wake, unless a request is in flight or the
// last was made less than WakeInterval ago, and opens a wake-up cycle.
func (h *Holder) wakeLocked(ctx context.Context) {
	now := time.Now()
	if h.waking || !h.lastWake.IsZero() && now.Sub(h.lastWake) < h.cfg.WakeInterval {
		return
	}
	if h.cycle.Start.IsZero() {
		h.cycle = Cycle{Start: now}
	}
	h.waking = true
	h.lastWake = now
	h.cycle.Requests++
	h.counters.wakeRequests.Add(1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, h.cfg.CallTimeout)
		err := h.waker.Wake(cctx)
		cancel()
		if err != nil {
			h.counters.wakeErrors.Add(1)
			h.cfg.Logger.Warn("wake: waking the pool", "err", err)
		}
		h.mu.Lock()
		h.waking = false
		if err != nil {
			// Let the next waiter try again at once.
			h.lastWake = time.Time{}
		}
		h.mu.Unlock()
	}()
}

// startPollLocked starts the poller unless it runs.
func (h *Holder) startPollLocked(ctx context.Context) {
	if h.polling {
		return
	}
	h.polling = true
	go h.poll(ctx)
}

// poll asks the Waker for the ready replicas while anyone needs to know:
// a connection waits, connections are in hand (to keep the list fresh) or
// a wake-up is open. It ends the wake-up cycle when a replica is ready,
// or, with no one left waiting, once the hold is over.
func (h *Holder) poll(ctx context.Context) {
	for {
		cctx, cancel := context.WithTimeout(ctx, h.cfg.CallTimeout)
		addrs, err := h.waker.Ready(cctx)
		cancel()
		now := time.Now()
		var ended *Cycle
		h.mu.Lock()
		if err != nil {
			h.counters.readyErrors.Add(1)
			h.cfg.Logger.Warn("wake: asking for the ready replicas", "err", err)
		} else {
			h.addrs, h.polledAt, h.valid = addrs, now, true
		}
		c := &h.cycle
		switch {
		case c.Start.IsZero():
		case err == nil && len(addrs) > 0:
			c.Ready, c.TimeToReady, c.Held = true, now.Sub(c.Start), int(h.counters.heldNow.Load())
			h.counters.wakes.Add(1)
			h.counters.lastTimeToReady.Store(int64(c.TimeToReady))
			e := *c
			ended, h.cycle = &e, Cycle{}
		case h.waiters == 0 && now.Sub(c.Start) >= h.cfg.HoldTimeout:
			e := *c
			ended, h.cycle = &e, Cycle{}
		}
		close(h.changed)
		h.changed = make(chan struct{})
		// Fast while someone waits or a wake-up is open; slow while the
		// list only needs keeping fresh for the connections in hand.
		interval := h.cfg.RefreshInterval
		if h.waiters > 0 || !h.cycle.Start.IsZero() || err != nil {
			interval = h.cfg.PollInterval
		}
		if h.waiters == 0 && h.active == 0 && h.cycle.Start.IsZero() || ctx.Err() != nil {
			h.polling = false
			h.mu.Unlock()
			h.report(ended)
			return
		}
		h.mu.Unlock()
		h.report(ended)
		t := time.NewTimer(interval)
		select {
		case <-t.C:
		case <-h.notify:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

func (h *Holder) report(c *Cycle) {
	if c != nil && h.cfg.OnWake != nil {
		h.cfg.OnWake(*c)
	}
}
