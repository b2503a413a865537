package controller

// A service pool's wake address (issue 29; config [pools.NAME.service.wake],
// the process in internal/wake, the socket in internal/units/wake.go). The
// wake process asks the pool to wake (Wake) when a connection finds no
// ready replica, and learns the ready replicas' addresses (WakeReady, a
// long poll). A wake holds the pool at one replica at least, from the
// request until hold_timeout_sec after the last one, and kicks the loop,
// so that the scale-up is this tick's, not the next one's. Not to be
// confused with wake.go: the early ticks of a source's wake-ups.
//
// The state is shared with the control API's goroutines under its own
// lock (ColdWake); the loop writes what it knows (the ready set, the
// settings) at every snapshot (note), and reads the hold at every decision
// (apply).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/workers"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// ErrNoWake: the pool has no wake address.
var ErrNoWake = errors.New("the pool has no wake address ([pools.NAME.service.wake])")

// ColdWake is a pool's wake address as the control API sees it: the
// requests of the wake process, and what the loop last told of the pool.
type ColdWake struct {
	// pool names the pool in replies; kick wakes its loop for a tick now;
	// clock is the pool's.
	pool  string
	kick  func()
	clock func() time.Time
	log   *eventlog.Logger

	mu sync.Mutex
	// As the loop last wrote them: the wake address ("" = none), its
	// mode and hold, and the ready replicas' addresses of the wake port.
	listen, mode string
	hold         time.Duration
	addrs        []string
	gen          uint64
	changed      chan struct{} // closed and replaced when addrs change
	// until is the end of the hold (the pool's clock); requests counts
	// the wake requests; stats is the wake process's last report.
	until    time.Time
	requests uint64
	stats    api.WakeStats
	// logged is the hold that the journal was told of.
	logged time.Time
}

// ColdWake is the pool's wake address, for the control API.
func (p *Pool) ColdWake() *ColdWake { return &p.cold }

// Request is a wake request from the wake process (req.Wake) and its report.
func (c *ColdWake) Request(req api.WakeRequest) (api.WakeResponse, error) {
	now := c.clock()
	c.mu.Lock()
	if c.listen == "" {
		c.mu.Unlock()
		return api.WakeResponse{}, ErrNoWake
	}
	c.stats = req.WakeStats
	if !req.Wake {
		c.mu.Unlock()
		return api.WakeResponse{Pool: c.pool}, nil
	}
	c.requests++
	first := !now.Before(c.until)
	c.until = now.Add(c.hold)
	listen, held := c.listen, req.Held
	c.mu.Unlock()
	if first {
		c.log.Event(eventlog.WakeRequested, eventlog.Info, eventlog.Fields{
			"FLEXIQ_WAKE_ADDRESS": listen, "FLEXIQ_HELD": strconv.FormatInt(held, 10),
		}, "woken by a connection at its wake address %s (%d held): scaling to one replica at least", listen, held)
	}
	c.kick()
	return api.WakeResponse{Pool: c.pool, Woken: true}, nil
}

// Ready returns the ready replicas' wake-port addresses once their
// generation differs from after, or when wait has passed or ctx ended.
func (c *ColdWake) Ready(ctx context.Context, after uint64, wait time.Duration) (api.WakeReady, error) {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		c.mu.Lock()
		if c.listen == "" {
			c.mu.Unlock()
			return api.WakeReady{}, ErrNoWake
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		r, ch := api.WakeReady{Generation: c.gen, Addrs: slices.Clone(c.addrs)}, c.changed
		c.mu.Unlock()
		if r.Generation != after || wait <= 0 {
			return r, nil
		}
		select {
		case <-ch:
		case <-timeout:
			return r, nil
		case <-ctx.Done():
			return r, nil
		}
	}
}

// View is what status shows of the wake address; nil when none.
func (c *ColdWake) View() *api.WakeView {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listen == "" {
		return nil
	}
	return &api.WakeView{Address: c.listen, Mode: c.mode, Requests: c.requests,
		Holding: c.clock().Before(c.until), WakeStats: c.stats}
}

// storeSnapshot publishes the pool's snapshot, and to the wake address's
// readers what they need of it.
func (p *Pool) storeSnapshot() {
	p.cold.note(p.cfg, p.workers)
	p.pub.Store()
}

// note writes what the loop knows for the wake address's readers: the
// settings, and the ready replicas, a new generation when they changed.
// The owner calls it at every snapshot.
func (c *ColdWake) note(cfg *config.Pool, ws *workers.Workers) {
	var listen, mode, port string
	var hold time.Duration
	if s := cfg.Service; s != nil && s.Wake.Listen != "" {
		listen, mode, port, hold = s.Wake.Listen, s.Wake.Mode, s.Wake.Port, s.Wake.HoldTimeout
	}
	var addrs []string
	if listen != "" && ws != nil && ws.Svc != nil {
		set, _ := ws.Svc.ReadySet()
		for _, r := range set.Leaders() {
			if n, ok := r.Ports[port]; ok {
				addrs = append(addrs, net.JoinHostPort(r.Address, strconv.Itoa(n)))
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listen, c.mode, c.hold = listen, mode, hold
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	if c.gen == 0 || !slices.Equal(addrs, c.addrs) {
		c.addrs = addrs
		c.gen++
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// apply holds the pool at one replica at least while a wake-up holds it,
// unless the operator's pause or pin (overridden) has the last word.
func (c *ColdWake) apply(d policy.Decision, e *api.Explanation, overridden bool, maxWorkers int) policy.Decision {
	now := c.clock()
	c.mu.Lock()
	until, listen := c.until, c.listen
	c.mu.Unlock()
	if listen == "" || !now.Before(until) || d.Desired >= 1 || overridden {
		return d
	}
	would := d
	d.Desired = min(1, maxWorkers)
	d.Action = policy.Stable
	if d.Desired > d.Current {
		d.Action = policy.ScaleUp
	}
	d.Rationale = fmt.Sprintf("woken by its wake address %s, holding at least %d for %s; the policy says %d (%s)",
		listen, d.Desired, until.Sub(now).Round(time.Second), would.Desired, would.Rationale)
	e.Add(api.Step{Name: "wake", Value: listen, Note: fmt.Sprintf("a connection at the wake address: at least %d replica until %s from now; the policy says %d",
		d.Desired, until.Sub(now).Round(time.Second), would.Desired)})
	return d
}
