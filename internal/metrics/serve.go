package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// SocketName is the metrics socket in the daemon's runtime directory.
const SocketName = "metrics.sock"

// Serve serves /metrics on the Unix socket at path until ctx ends. The
// socket is 0666: flexiq-scaled-metrics.service's proxy runs as a dynamic
// user, and what it exposes is what the socket unit already offers every
// local user on 127.0.0.1.
func (m *Metrics) Serve(ctx context.Context, path string) error {
	os.Remove(path) // a socket left by a killed daemon
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("metrics socket: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return fmt.Errorf("metrics socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Timeout: 10 * time.Second}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 15 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			// The daemon runs on without metrics.
			fmt.Fprintf(os.Stderr, "flexiq-scaled: metrics: %v\n", err)
		}
		os.Remove(path)
	}()
	return nil
}
