package daemon

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	ctlsock "github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/metrics"
	"github.com/flexiq/flexiq-scaled/internal/sockguard"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// startMetrics builds the daemon's metrics and serves them on
// RUNTIME_DIR/metrics.sock until ctx ends. The event log's tap counts worker
// starts and crashes; it is set here, before any pool runs. A socket that
// cannot be made costs the metrics, never the daemon.
//
// The socket is 0660, group flexiq-scaled: the metrics name the pools and
// their queues as `status` does, which is that group's to read.
// flexiq-scaled-metrics.service's proxy, a dynamic user, gets the group
// through SupplementaryGroups=. Where the group does not exist, the socket
// is root's alone. Connections are judged as the control socket's are (a
// peer in neither group is refused at accept) and capped alike.
func startMetrics(ctx context.Context, o Options, log *eventlog.Logger, mgr *units.Manager) *metrics.Metrics {
	met := metrics.New(mgr.Reconnects, mgr)
	log.SetTap(met.Event)
	path := filepath.Join(o.RuntimeDir, metrics.SocketName)
	gid := -1 // the daemon of a user's service manager: the socket stays its user's
	if os.Geteuid() == 0 {
		var err error
		if gid, err = lookupGroup(ctlsock.ReadGroup); err != nil {
			gid = 0
			log.Event(eventlog.Lifecycle, eventlog.Warning, nil,
				"metrics socket %s: no group %s (%v): only root may read it, and flexiq-scaled-metrics.service cannot start", path, ctlsock.ReadGroup, err)
		}
	}
	l, err := sockguard.Listen(path, 0o660, gid)
	if err != nil {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "no metrics: metrics socket: %v", err)
		return met
	}
	met.Serve(ctx, l, sockguard.Config{
		Name:   "metrics socket",
		Limits: sockguard.DefaultLimits,
		Admit:  ctlsock.Authorizer{Owner: uint32(os.Geteuid())}.Admit,
		Logf: func(format string, args ...any) {
			log.Event(eventlog.Lifecycle, eventlog.Warning, nil, format, args...)
		},
	})
	return met
}

func lookupGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}
