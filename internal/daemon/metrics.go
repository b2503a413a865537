package daemon

import (
	"context"
	"path/filepath"

	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/metrics"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// startMetrics builds the daemon's metrics and serves them on
// RUNTIME_DIR/metrics.sock until ctx ends. The event log's tap counts worker
// starts and crashes; it is set here, before any pool runs. A socket that
// cannot be made costs the metrics, never the daemon.
func startMetrics(ctx context.Context, o Options, log *eventlog.Logger, mgr *units.Manager) *metrics.Metrics {
	met := metrics.New(mgr.Reconnects, mgr)
	log.SetTap(met.Event)
	if err := met.Serve(ctx, filepath.Join(o.RuntimeDir, metrics.SocketName)); err != nil {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "no metrics: %v", err)
	}
	return met
}
