// Command flexiq-testservice is a small HTTP service for the end-to-end
// tests of flexiq-scaled's service pools (issue 19, "Tests, for real, in
// the sandbox": the test service in test/). The sandbox runs it as the
// replicas of a pool behind nginx; the package test/loadgen sends traffic
// through nginx and counts every failed request.
//
// It serves:
//   - /health: 503 until ready (-ready-after simulates a slow model load),
//     200 after; -fail-health-after, or SIGUSR2 (a toggle), makes a ready
//     replica fail its probe, for the "leaves discovery" tests;
//   - /metrics: Prometheus text, with flexiq_testservice_requests_in_flight,
//     flexiq_testservice_requests_total{code} and
//     flexiq_testservice_info{pool,slot} from FLEXIQ_SCALED_POOL/_SLOT;
//   - / and every other path: a body naming the slot after -latency
//     (plus up to -jitter).
//
// It listens on 127.0.0.1:$FLEXIQ_PORT_HTTP (or -listen; without either an
// ephemeral port) and prints "listening on ADDR". A failed bind exits 1,
// which the daemon must count as a failed start. Started by systemd with a
// socket passed (LISTEN_FDS, a pool's port with socket = true), it serves
// the one named "http" (-fd-name) instead, and binds nothing itself;
// passed sockets but none of that name exit 1. When ready it sends
// READY=1 if NOTIFY_SOCKET is set, for the Type=notify readiness path. On
// SIGTERM or SIGINT it shuts down gracefully: the listener closes at once
// (new connections are refused), requests in hand finish, and it exits 0
// within -drain-timeout (1 if requests were still running then).
//
// test/services runs it as the replicas of service pools.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
)

// exitUsage is the status of a bad flag, as in test/worker.
const exitUsage = 2

// config is what runMain reads from flags and the environment.
type config struct {
	listen          string
	readyAfter      time.Duration
	failHealthAfter time.Duration
	latency, jitter time.Duration
	drainTimeout    time.Duration
	fdName          string
}

// listen is the socket systemd passed under c.fdName, if it passed any,
// else a socket of our own on c.listen.
func listen(c config) (net.Listener, error) {
	if os.Getenv("LISTEN_FDS") == "" {
		return net.Listen("tcp", c.listen)
	}
	passed, err := activation.ListenersWithNames()
	if err != nil {
		return nil, fmt.Errorf("sockets passed by systemd: %w", err)
	}
	if ls := passed[c.fdName]; len(ls) == 1 {
		return ls[0], nil
	}
	names := make([]string, 0, len(passed))
	for n, ls := range passed {
		names = append(names, fmt.Sprintf("%s (%d)", n, len(ls)))
	}
	return nil, fmt.Errorf("systemd passed no single listening socket named %q (LISTEN_FDNAMES: %v)", c.fdName, names)
}

func main() {
	os.Exit(runMain())
}

// defaultListen is the loopback address at $FLEXIQ_PORT_HTTP, the port the
// daemon assigns each replica, or an ephemeral port without it.
func defaultListen() string {
	return net.JoinHostPort("127.0.0.1", os.Getenv("FLEXIQ_PORT_HTTP"))
}

func runMain() int {
	var c config
	flag.StringVar(&c.listen, "listen", defaultListen(), "address to listen on (default 127.0.0.1:$FLEXIQ_PORT_HTTP; port 0 or unset picks one)")
	flag.DurationVar(&c.readyAfter, "ready-after", 0, "answer /health 503 for this long after start (a slow model load)")
	flag.DurationVar(&c.failHealthAfter, "fail-health-after", 0, "once ready, fail /health after this long (0: never); SIGUSR2 toggles it too")
	flag.DurationVar(&c.latency, "latency", 0, "time each request takes")
	flag.DurationVar(&c.jitter, "jitter", 0, "extra random time per request, up to this")
	flag.DurationVar(&c.drainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, wait this long for requests in hand")
	flag.StringVar(&c.fdName, "fd-name", "http", "with sockets passed by systemd (LISTEN_FDS), serve the one of this FileDescriptorName=")
	flag.Parse()

	pool, slot := os.Getenv("FLEXIQ_SCALED_POOL"), os.Getenv("FLEXIQ_SCALED_SLOT")
	// Pool and slot on every line let a test tell from the journal which
	// replica did what, as test/worker's lines do.
	logger := log.New(os.Stdout, fmt.Sprintf("service pool=%s slot=%s ", pool, slot), 0)
	if c.readyAfter < 0 || c.failHealthAfter < 0 || c.latency < 0 || c.jitter < 0 || c.drainTimeout <= 0 {
		logger.Print("durations must not be negative, and -drain-timeout must be positive")
		return exitUsage
	}

	ln, err := listen(c)
	if err != nil {
		logger.Printf("listen: %v", err)
		return 1
	}
	logger.Printf("listening on %s", ln.Addr())

	s := newService(pool, slot, c.latency, c.jitter)
	watchHealthToggle(logger, s)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, s, ln, c, logger); err != nil {
		logger.Print(err)
		return 1
	}
	logger.Print("stopped cleanly")
	return 0
}

// watchHealthToggle flips the failing flag at each SIGUSR2, so a test can
// make a ready replica fail its probe and pass it again.
func watchHealthToggle(logger *log.Logger, s *service) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGUSR2)
	go func() {
		for range ch {
			failing := !s.failing.Load()
			s.failing.Store(failing)
			logger.Printf("SIGUSR2: health failing=%v", failing)
		}
	}()
}
