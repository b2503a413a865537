package units

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/godbus/dbus/v5"
)

// link is the Manager's connection to systemd and what keeps it usable: a
// call that fails because systemd re-executed or the bus daemon restarted
// waits until systemd answers again and is retried once, on the same
// connection or a fresh one. It knows nothing of units.
type link struct {
	dial func(ctx context.Context) (*dbus.Conn, error)

	// life is the context connections are dialled with; close cancels it.
	life   context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	conn   *conn
	closed bool

	// redial admits one reconnect at a time; a channel rather than a mutex
	// so that waiting for it is bounded by the caller's context.
	redial     chan struct{}
	reconnects atomic.Int64
}

// close closes the connection once; it reports whether this call did.
func (m *link) close() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.closed = true
	m.cancel()
	if m.conn != nil {
		m.conn.Close()
		m.conn = nil
	}
	return true
}

// Reconnects counts the connections dialled after the first one, e.g. after
// a restart of the D-Bus daemon: worth exporting as a metric.
func (m *link) Reconnects() int64 { return m.reconnects.Load() }

func (m *link) current() (*conn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errClosed
	}
	return m.conn, nil
}

// call runs fn on the current connection. If fn fails because systemd or
// the bus went away, it waits (with backoff, bounded by ctx) until systemd
// answers again, on the same connection or a new one, and retries fn once.
// Errors name the operation.
func (m *link) call(ctx context.Context, op string, fn func(*conn) error) error {
	c, err := m.current()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err = fn(c)
	if err == nil {
		return nil
	}
	if !transient(err, c) || ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if rerr := m.reconnect(ctx); rerr != nil {
		return fmt.Errorf("%s: %w (reconnecting: %v)", op, err, rerr)
	}
	c, err = m.current()
	if err == nil {
		err = fn(c)
	}
	if err != nil {
		return fmt.Errorf("%s (after reconnecting): %w", op, err)
	}
	return nil
}

// reconnect makes systemd reachable again after a call failed. A
// connection that is still up (the bus survived and only systemd left it, as
// in daemon-reexec) is kept and pinged until systemd is back; a dead one (the
// bus daemon restarted) is replaced by a fresh dial first.
func (m *link) reconnect(ctx context.Context) error {
	select {
	case m.redial <- struct{}{}:
		defer func() { <-m.redial }()
	case <-ctx.Done():
		return ctx.Err()
	}
	delay := backoffMin
	for {
		c, err := m.current()
		if err != nil {
			return err
		}
		if !c.Connected() {
			c, err = m.replace(ctx, c)
		}
		if err == nil {
			if err = ping(ctx, c); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, backoffMax)
	}
}

// replace dials a new connection and swaps it in for old.
func (m *link) replace(ctx context.Context, old *conn) (*conn, error) {
	c, err := m.dialOnce(ctx)
	if err != nil {
		return nil, fmt.Errorf("dialling: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		c.Close()
		return nil, errClosed
	}
	old.Close()
	m.conn = c
	m.reconnects.Add(1)
	return c, nil
}

// dialOnce calls the dial function with the Manager's life context but
// gives up waiting when ctx ends; a connection that arrives too late is
// closed.
func (m *link) dialOnce(ctx context.Context) (*conn, error) {
	type result struct {
		c   *conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := connect(m.life, m.dial)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
