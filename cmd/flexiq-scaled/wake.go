package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/wake"
)

// cmdWake is the process behind a service pool's wake address (issue 29),
// not a command for people: the daemon's flexiq-POOL-wake.socket starts it
// (internal/units/wake.go) with the listening socket, and it holds the
// connections while the pool wakes, forwards them to the first ready
// replica, and exits once idle with the pool awake, leaving the socket to
// systemd. The daemon starts it through that socket's service while the
// pool has no ready replica, so that a first connection finds it up. It
// is not listed by help.
func cmdWake(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("wake", "[flags] POOL", "Serve a service pool's wake address with the socket systemd passes (LISTEN_FDS); started by flexiq-POOL-wake.socket.")
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "the daemon's control socket")
	root := fs.String("root-socket", "", "the daemon's root control socket, tried first")
	mode := fs.String("mode", config.WakeHold, `"hold" or "reject"`)
	hold := fs.Duration("hold-timeout", config.DefaultHoldTimeout, "how long a connection is held at most")
	idle := fs.Duration("idle-exit", 30*time.Second, "exit after this long with no connection in hand and the pool awake")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 || *socket == "" || (*mode != config.WakeHold && *mode != config.WakeReject) {
		fs.Usage()
		return exitUsage
	}
	pool := fs.Arg(0)
	log := eventlog.New(stderr).With("pool", pool)
	ln, err := wake.SystemdListener()
	if err != nil {
		fmt.Fprintf(stderr, "%s wake: %v\n", prog, err)
		return exitFail
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	w := newControlWaker(&control.Client{Socket: *socket, Root: *root}, pool)
	cfg := wake.Config{
		HoldTimeout: *hold, IdleExit: *idle,
		Logger: slog.New(slog.NewTextHandler(stderr, nil)),
		OnWake: func(c wake.Cycle) { logCycle(log, ln.Addr().String(), c) },
	}
	if *mode == config.WakeReject {
		cfg.Mode = wake.ModeReject
	}
	h := wake.New(w, cfg)
	w.stats = h.Stats
	go w.report(ctx)
	err = h.Serve(ctx, ln)
	w.sendReport() // the last counters: nothing held any more
	switch {
	case errors.Is(err, wake.ErrIdle), ctx.Err() != nil:
		return exitOK
	default:
		fmt.Fprintf(stderr, "%s wake: %v\n", prog, err)
		return exitFail
	}
}

// logCycle is the journal entry of one wake-up.
func logCycle(log *eventlog.Logger, addr string, c wake.Cycle) {
	f := eventlog.Fields{
		"FLEXIQ_WAKE_ADDRESS":  addr,
		"FLEXIQ_HELD":          strconv.Itoa(c.Held),
		"FLEXIQ_WAKE_REQUESTS": strconv.FormatUint(c.Requests, 10),
		"FLEXIQ_READY":         strconv.FormatBool(c.Ready),
	}
	if !c.Ready {
		log.Event(eventlog.WakeCycle, eventlog.Warning, f,
			"wake-up at %s ended without a ready replica after %s (%d wake requests)", addr, time.Since(c.Start).Round(time.Millisecond), c.Requests)
		return
	}
	f["FLEXIQ_TIME_TO_READY_SEC"] = strconv.FormatFloat(c.TimeToReady.Seconds(), 'f', 3, 64)
	log.Event(eventlog.WakeCycle, eventlog.Info, f,
		"woken at %s: first replica ready after %s, %d connections held", addr, c.TimeToReady.Round(time.Millisecond), c.Held)
}

// controlWaker is the pool as the daemon's control socket shows it: Wake
// asks it to wake, Ready reads the ready replicas, and a long poll of
// their generation signals Changed, so that a held connection goes to a
// replica as soon as the daemon has it ready.
type controlWaker struct {
	c       *control.Client
	pool    string
	stats   func() wake.Stats
	changed chan struct{}

	mu      sync.Mutex
	polling bool
	live    bool // the long poll holds the current answer
	ready   api.WakeReady
}

func newControlWaker(c *control.Client, pool string) *controlWaker {
	return &controlWaker{c: c, pool: pool, changed: make(chan struct{}, 1)}
}

func (w *controlWaker) Changed() <-chan struct{} { return w.changed }

func (w *controlWaker) Wake(context.Context) error {
	_, err := w.c.Wake(w.pool, api.WakeRequest{Wake: true, WakeStats: w.wakeStats()})
	return err
}

func (w *controlWaker) Ready(context.Context) ([]string, error) {
	w.mu.Lock()
	if !w.polling {
		w.polling = true
		go w.longPoll()
	}
	if w.live {
		addrs := slices.Clone(w.ready.Addrs)
		w.mu.Unlock()
		return addrs, nil
	}
	w.mu.Unlock()
	r, err := w.c.WakeReady(w.pool, 0, 0)
	return r.Addrs, err
}

// longPoll waits for each new generation of the ready replicas, for the
// process's life; after a failure, Ready asks directly until it answers
// again.
func (w *controlWaker) longPoll() {
	var after uint64
	for {
		r, err := w.c.WakeReady(w.pool, after, control.MaxWakeWait)
		w.mu.Lock()
		w.live = err == nil
		if err == nil {
			w.ready = r
		}
		w.mu.Unlock()
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if r.Generation != after {
			after = r.Generation
			select {
			case w.changed <- struct{}{}:
			default:
			}
		}
	}
}

func (w *controlWaker) wakeStats() api.WakeStats {
	if w.stats == nil {
		return api.WakeStats{}
	}
	s := w.stats()
	return api.WakeStats{Held: s.HeldNow, Forwarding: s.ForwardingNow, Accepted: s.Accepted, Forwarded: s.Forwarded, Rejected: s.Rejected}
}

func (w *controlWaker) sendReport() {
	_, _ = w.c.Wake(w.pool, api.WakeRequest{WakeStats: w.wakeStats()})
}

// report sends the counters to the daemon (status, the held gauge) once
// a second while they change.
func (w *controlWaker) report(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var last api.WakeStats
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s := w.wakeStats(); s != last {
			last = s
			w.sendReport()
		}
	}
}
