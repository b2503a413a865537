package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
)

// run serves s on ln until ctx ends, then shuts down gracefully within
// c.drainTimeout. It marks s ready after c.readyAfter (notifying systemd
// when NOTIFY_SOCKET is set) and failing c.failHealthAfter later.
func run(ctx context.Context, s *service, ln net.Listener, c config, logger *log.Logger) error {
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	readyTimer := time.AfterFunc(c.readyAfter, func() { becomeReady(s, c, logger) })
	defer readyTimer.Stop()

	select {
	case err := <-served:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	logger.Printf("stopping: draining requests in hand (up to %v)", c.drainTimeout)
	_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
	sctx, cancel := context.WithTimeout(context.Background(), c.drainTimeout)
	defer cancel()
	// Shutdown closes the listener first, so new connections are refused,
	// then waits for active requests; idle keep-alive connections close.
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("graceful shutdown within %v: %w", c.drainTimeout, err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// becomeReady flips /health to 200 and tells systemd, then arms the
// optional health failure.
func becomeReady(s *service, c config, logger *log.Logger) {
	s.ready.Store(true)
	sent, err := sddaemon.SdNotify(false, sddaemon.SdNotifyReady)
	switch {
	case err != nil:
		logger.Printf("ready; sd_notify READY=1 failed: %v", err)
	case sent:
		logger.Print("ready; sent READY=1")
	default:
		logger.Print("ready")
	}
	if c.failHealthAfter > 0 {
		time.AfterFunc(c.failHealthAfter, func() {
			s.failing.Store(true)
			logger.Printf("failing /health as asked after %v", c.failHealthAfter)
		})
	}
}
