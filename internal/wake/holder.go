package wake

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Waker is the pool as the holder sees it. In production it is the
// daemon's control socket ("wake POOL", "ready replicas of POOL").
type Waker interface {
	// Wake asks the pool to scale up from zero at once. The holder calls
	// it when a connection finds no ready replica, at most once per
	// Config.WakeInterval and never twice at a time; the pool must treat
	// a repeat as a no-op.
	Wake(ctx context.Context) error
	// Ready returns the addresses (host:port) of the pool's ready
	// replicas, none while it has none.
	Ready(ctx context.Context) ([]string, error)
}

// Notifier is what a Waker may add to spare the holder its polling delay:
// a value on Changed when Ready's answer may have changed.
type Notifier interface {
	Changed() <-chan struct{}
}

// Mode is what a connection that finds no ready replica gets.
type Mode int

const (
	// ModeHold holds it until a replica is ready or the hold ends.
	ModeHold Mode = iota
	// ModeReject answers it 503 with Retry-After at once (HTTP/1.x;
	// other protocols are closed) while the pool wakes.
	ModeReject
)

// Config bounds a Holder. Zero fields take the defaults in parentheses.
type Config struct {
	Mode Mode
	// HoldTimeout is how long a connection is held (60 s).
	HoldTimeout time.Duration
	// RetryAfter is the Retry-After of a 503, rounded up to seconds (5 s).
	RetryAfter time.Duration
	// IdleExit is how long Serve goes on with no connection in hand and
	// the pool awake (Ready answers some replica) before it returns
	// ErrIdle (30 s). While the pool has no ready replica it stays:
	// traffic comes to the wake address then, and its first connection
	// must not wait for a process to start.
	IdleExit time.Duration
	// PollInterval is how often Ready is asked while a connection waits
	// (20 ms); RefreshInterval while replicas are known and connections
	// are being forwarded (500 ms). A known list older than twice
	// RefreshInterval is asked again before it is used.
	PollInterval, RefreshInterval time.Duration
	// WakeInterval spaces the Wake calls while no replica is ready (1 s),
	// so that a pool that went back to zero meanwhile is woken again.
	WakeInterval time.Duration
	// CallTimeout bounds one Wake or Ready call (5 s).
	CallTimeout time.Duration
	// DialTimeout bounds one dial of a replica (1 s).
	DialTimeout time.Duration
	// FirstBytesTimeout bounds the wait for a request's head before it is
	// answered 503, and the write of that answer (2 s).
	FirstBytesTimeout time.Duration
	// OnWake, when set, is called once per wake-up as it ends, off the
	// holder's lock.
	OnWake func(Cycle)
	// Logger gets the errors of the Waker and of the dials (discarded
	// when nil).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.HoldTimeout, 60*time.Second)
	def(&c.RetryAfter, 5*time.Second)
	def(&c.IdleExit, 30*time.Second)
	def(&c.PollInterval, 20*time.Millisecond)
	def(&c.RefreshInterval, 500*time.Millisecond)
	def(&c.WakeInterval, time.Second)
	def(&c.CallTimeout, 5*time.Second)
	def(&c.DialTimeout, time.Second)
	def(&c.FirstBytesTimeout, 2*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// ErrIdle is what Serve returns when it stopped for want of connections.
var ErrIdle = errors.New("wake: idle")

// errHoldOver ends a wait for a replica.
var errHoldOver = errors.New("hold over")

// Holder is the wake address's server. Its zero value is not usable: New.
type Holder struct {
	cfg      Config
	waker    Waker
	notify   <-chan struct{}
	counters counters

	mu sync.Mutex
	// active counts the connections in hand (held, forwarded, refused);
	// idleGen changes whenever it leaves zero, so that a stale idle timer
	// does not stop Serve.
	active  int
	idleGen uint64
	// The replicas as last polled; changed is closed and replaced after
	// every poll, waking the waiters.
	addrs    []string
	polledAt time.Time
	valid    bool
	changed  chan struct{}
	waiters  int
	polling  bool
	// The wake-up in progress (cycle.Start zero when none).
	cycle    Cycle
	waking   bool
	lastWake time.Time
	rr       uint64
}

// New returns a Holder that wakes and asks w.
func New(w Waker, cfg Config) *Holder {
	h := &Holder{cfg: cfg.withDefaults(), waker: w, changed: make(chan struct{})}
	if n, ok := w.(Notifier); ok {
		h.notify = n.Changed()
	}
	return h
}

type deadliner interface{ SetDeadline(time.Time) error }

// Serve accepts connections on ln until ctx ends (it returns ctx's error)
// or no connection has been in hand for IdleExit (ErrIdle), then waits
// for the connections in hand. It stops accepting by a deadline, not by
// closing ln, so that connections still queued stay in the kernel for the
// next process systemd starts. Held connections are refused when ctx ends;
// forwarded ones run to their end.
func (h *Holder) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := make(chan struct{})
	var idleOnce sync.Once
	stop := func() {
		if d, ok := ln.(deadliner); ok {
			_ = d.SetDeadline(time.Unix(1, 0))
		} else {
			_ = ln.Close()
		}
	}
	// A deadline left by an earlier Serve on the same listener would
	// end this one at once.
	if d, ok := ln.(deadliner); ok {
		_ = d.SetDeadline(time.Time{})
	}
	fire := func() { idleOnce.Do(func() { close(idle); stop() }) }
	h.mu.Lock()
	h.armIdleLocked(ctx, fire)
	// Learn the pool's state before the first connection: it then wakes
	// the pool at once rather than after asking.
	h.startPollLocked(ctx)
	h.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-idle:
		}
	}()

	var wg sync.WaitGroup
	defer wg.Wait()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-idle:
				wg.Wait()
				return ErrIdle
			case <-ctx.Done():
				wg.Wait()
				return ctx.Err()
			default:
			}
			// Out of descriptors and the like: the connection stays
			// queued; try again shortly, as net/http does.
			var ne net.Error
			if errors.As(err, &ne) && !errors.Is(err, net.ErrClosed) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				h.cfg.Logger.Warn("wake: accept", "err", err)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		h.counters.accepted.Add(1)
		h.mu.Lock()
		h.active++
		h.idleGen++
		h.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.handle(ctx, c)
			h.mu.Lock()
			h.active--
			h.armIdleLocked(ctx, fire)
			h.mu.Unlock()
		}()
	}
}

// armIdleLocked starts the idle timer when nothing is in hand. When it
// fires with nothing in hand still, the holder exits if the pool is awake,
// and waits another IdleExit if it is not (or cannot be asked).
func (h *Holder) armIdleLocked(ctx context.Context, fire func()) {
	if h.active > 0 {
		return
	}
	gen := h.idleGen
	time.AfterFunc(h.cfg.IdleExit, func() {
		still := func() bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.active == 0 && h.idleGen == gen
		}
		if !still() || ctx.Err() != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, h.cfg.CallTimeout)
		addrs, err := h.waker.Ready(cctx)
		cancel()
		h.mu.Lock()
		if h.active > 0 || h.idleGen != gen || ctx.Err() != nil {
			h.mu.Unlock()
			return
		}
		if err != nil || len(addrs) == 0 {
			h.armIdleLocked(ctx, fire)
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		fire()
	})
}

// handle serves one connection: forwarded at once when a replica is
// known, else held (or refused in ModeReject) while the pool wakes.
func (h *Holder) handle(ctx context.Context, c net.Conn) {
	defer c.Close()
	if h.cfg.Mode == ModeReject {
		addrs, err := h.wait(ctx, time.Now().Add(h.cfg.CallTimeout), true)
		if err == nil && h.forward(ctx, c, nil, addrs) {
			return
		}
		h.refuse(c, nil)
		return
	}
	h.counters.heldNow.Add(1)
	deadline := time.Now().Add(h.cfg.HoldTimeout)
	for {
		addrs, err := h.wait(ctx, deadline, false)
		if err != nil {
			h.counters.heldNow.Add(-1)
			h.refuse(c, nil)
			return
		}
		if h.forward(ctx, c, nil, addrs) {
			return
		}
		// Every replica refused: its list is stale; ask again.
		h.invalidate()
	}
}

func (h *Holder) invalidate() {
	h.mu.Lock()
	h.valid = false
	h.mu.Unlock()
}

// wait returns the ready replicas, waking the pool and polling until
// some are ready, the deadline passes or ctx ends. With once, it gives up
// after the first poll that finds none.
func (h *Holder) wait(ctx context.Context, deadline time.Time, once bool) ([]string, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	h.mu.Lock()
	h.waiters++
	defer func() {
		h.mu.Lock()
		h.waiters--
		h.mu.Unlock()
	}()
	polled := false
	for {
		if h.valid && len(h.addrs) > 0 && time.Since(h.polledAt) < 2*h.cfg.RefreshInterval {
			addrs := h.addrs
			h.mu.Unlock()
			return addrs, nil
		}
		if h.valid && len(h.addrs) == 0 {
			h.wakeLocked(ctx)
			if polled && once {
				h.mu.Unlock()
				return nil, errHoldOver
			}
		}
		h.startPollLocked(ctx)
		ch := h.changed
		h.mu.Unlock()
		select {
		case <-ch:
			polled = true
		case <-timer.C:
			return nil, errHoldOver
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		h.mu.Lock()
	}
}
