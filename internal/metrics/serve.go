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

	"github.com/flexiq/flexiq-scaled/internal/sockguard"
)

// SocketName is the metrics socket in the daemon's runtime directory.
const SocketName = "metrics.sock"

// Serve serves /metrics on l until ctx ends, with the guard's limits: the
// same caps and timeouts as the control socket, so that neither a flood nor
// idle connections hold the daemon's descriptors. The caller opens l (mode
// and group: see daemon.startMetrics) and says who is admitted.
func (m *Metrics) Serve(ctx context.Context, l net.Listener, guard sockguard.Config) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Timeout: 10 * time.Second}))
	go func() {
		if err := guard.Serve(ctx, l, mux); err != nil && !errors.Is(err, net.ErrClosed) {
			// The daemon runs on without metrics.
			fmt.Fprintf(os.Stderr, "flexiq-scaled: metrics: %v\n", err)
		}
	}()
}
