package daemon

// The daemon's side of the control socket (package control): the pools'
// snapshots, their decisions, and the operator's changes.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flexiq/flexiq-scaled/internal/api"
	// Named apart from the file-and-signal protocol's control type (control.go).
	ctlsock "github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/internal/controller"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
)

// StateDir is where the operator's overrides live: $STATE_DIRECTORY when
// systemd set it (StateDirectory=), else /var/lib/flexiq-scaled, or
// $XDG_STATE_HOME/flexiq-scaled for the user's service manager.
func StateDir(user bool) string {
	home, _ := os.UserHomeDir()
	return serviceDir("STATE_DIRECTORY", user, "XDG_STATE_HOME", filepath.Join(home, ".local", "state"), "/var/lib")
}

// serveControl opens the control socket and serves it until ctx ends. A
// socket that cannot be opened costs the operator's commands, not the
// scaling: a warning.
func (d *daemon) serveControl(ctx context.Context) {
	path := filepath.Join(d.opts.RuntimeDir, ctlsock.SocketName)
	l, err := ctlsock.Listen(path)
	if err != nil {
		d.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "%v: flexiq-scaled status, explain, pause and pin will not work", err)
		return
	}
	srv := &ctlsock.Server{Backend: d, Auth: ctlsock.Authorizer{Owner: uint32(os.Geteuid())}, Logf: func(format string, args ...any) {
		d.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, format, args...)
	}}
	go func() {
		if err := srv.Serve(ctx, l); err != nil {
			d.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "control socket %s: %v", path, err)
		}
		os.Remove(path)
	}()
}

func (d *daemon) pool(name string) (*controller.Pool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rp, ok := d.pools[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not configured", ctlsock.ErrNoPool, name)
	}
	return rp.pool, nil
}

// Views implements control.Backend.
func (d *daemon) Views(name string) ([]api.View, error) {
	if name != "" {
		p, err := d.pool(name)
		if err != nil {
			return nil, err
		}
		return []api.View{p.View()}, nil
	}
	vs := []api.View{}
	for _, rp := range d.snapshot() {
		vs = append(vs, rp.pool.View())
	}
	return vs, nil
}

// Explain implements control.Backend.
func (d *daemon) Explain(name string, last int) ([]api.Explanation, error) {
	p, err := d.pool(name)
	if err != nil {
		return nil, err
	}
	return p.Explain(last), nil
}

// SetOverride implements control.Backend.
func (d *daemon) SetOverride(name string, o api.Override) (api.Override, error) {
	p, err := d.pool(name)
	if err != nil {
		return api.Override{}, err
	}
	return p.SetOverride(o)
}

// Roll implements control.Backend, as the roll request does.
func (d *daemon) Roll(names []string, reason string) ([]string, error) {
	var ps []*controller.Pool
	for _, name := range names {
		p, err := d.pool(name)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	var lines []string
	for _, p := range ps {
		p.Roll(reason)
		lines = append(lines, "pool "+p.Name()+": rollout requested")
	}
	return lines, nil
}
