package daemon

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	ctlsock "github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/internal/controller"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// The pools' wake addresses (issue 29): the daemon keeps one socket unit
// per pool with a wake address (internal/units/wake.go) and answers its
// process on the control socket (control.WakeBackend).

// Wake implements control.WakeBackend.
func (d *daemon) Wake(name string, req api.WakeRequest) (api.WakeResponse, error) {
	p, err := d.pool(name)
	if err != nil {
		return api.WakeResponse{}, err
	}
	resp, err := p.ColdWake().Request(req)
	if err == controller.ErrNoWake {
		return resp, fmt.Errorf("pool %s: %w", name, ctlsock.ErrNoWake)
	}
	if err == nil && d.metrics != nil {
		if req.Wake {
			d.metrics.WakeRequest(name)
		}
		d.metrics.WakeHeld(name, req.Held)
	}
	return resp, err
}

// WakeReady implements control.WakeBackend.
func (d *daemon) WakeReady(ctx context.Context, name string, after uint64, wait time.Duration) (api.WakeReady, error) {
	p, err := d.pool(name)
	if err != nil {
		return api.WakeReady{}, err
	}
	r, err := p.ColdWake().Ready(ctx, after, wait)
	if err == controller.ErrNoWake {
		return r, fmt.Errorf("pool %s: %w", name, ctlsock.ErrNoWake)
	}
	return r, err
}

// wakeSpec is the socket unit of pool pc's wake address; ok false when it
// has none.
func (d *daemon) wakeSpec(pc *config.Pool) (units.WakeSpec, bool) {
	w := pc.Service
	if w == nil || w.Wake.Listen == "" {
		return units.WakeSpec{}, false
	}
	self, err := os.Executable()
	if err != nil {
		self = "/usr/bin/flexiq-scaled"
	}
	// control.sock alone: the wake process is a dynamic user, which
	// root.sock refuses (internal/daemon/wakepeer.go).
	exec := []string{self, "wake",
		"--socket", filepath.Join(d.opts.RuntimeDir, ctlsock.SocketName),
		"--mode", w.Wake.Mode,
		"--hold-timeout", w.Wake.HoldTimeout.String(),
		pc.Name}
	return units.WakeSpec{Pool: pc.Name, Listen: w.Wake.Listen, Exec: exec}, true
}

// syncWake makes the wake sockets match cfg: each pool's with a wake
// address started, or adopted as the last daemon left it, or replaced
// when its definition changed, and kept warm; the others' stopped. A
// socket that cannot listen is a warning: the pool scales without it.
func (d *daemon) syncWake(outer context.Context, cfg *config.Config) {
	ctx, cancel := context.WithTimeout(outer, 30*time.Second)
	defer cancel()
	found, err := d.units.WakeStates(ctx)
	if err != nil {
		d.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "listing the wake sockets: %v", err)
	}
	var listening []string
	for _, pc := range cfg.SortedPools() {
		name := pc.Name
		spec, ok := d.wakeSpec(pc)
		if !ok {
			continue
		}
		delete(found, name)
		started, err := d.units.EnsureWake(ctx, spec)
		switch {
		case err != nil:
			d.log.Event(eventlog.Lifecycle, eventlog.Warning, eventlog.Fields{"FLEXIQ_POOL": name},
				"pool=%s wake address %s: %v: connections there are refused", name, spec.Listen, err)
			continue
		case started:
			d.log.Event(eventlog.Lifecycle, eventlog.Info, eventlog.Fields{"FLEXIQ_POOL": name},
				"pool=%s wake address %s: %s listening", name, spec.Listen, units.WakeSocketName(name))
		}
		listening = append(listening, name)
	}
	d.warmers.run(outer, listening)
	for _, name := range slices.Sorted(maps.Keys(found)) {
		if err := d.units.StopWake(ctx, name); err != nil {
			d.log.Event(eventlog.Lifecycle, eventlog.Warning, eventlog.Fields{"FLEXIQ_POOL": name},
				"pool=%s: stopping its wake address, which the configuration no longer has: %v", name, err)
			continue
		}
		d.log.Event(eventlog.Lifecycle, eventlog.Info, eventlog.Fields{"FLEXIQ_POOL": name},
			"pool=%s: wake address stopped: the configuration no longer has it", name)
	}
}

// stopWake stops every wake socket: the daemon stops, its workers drain,
// and nobody would wake a pool for the connections the sockets took.
func (d *daemon) stopWake(ctx context.Context) {
	d.warmers.stop()
	found, err := d.units.WakeStates(ctx)
	if err != nil {
		return
	}
	for name := range found {
		_ = d.units.StopWake(ctx, name)
	}
}
