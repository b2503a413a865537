package daemon

// The daemon's side of the control socket (package control): the pools'
// snapshots, their decisions, the operator's changes, and reloads; and the
// daemon's directories.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	ctlsock "github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/internal/controller"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
)

// RuntimeDir is the daemon's runtime directory, which holds the control
// socket: $RUNTIME_DIRECTORY when systemd set it (RuntimeDirectory=, for
// ExecStart= and ExecReload= alike), else /run/flexiq-scaled, or
// $XDG_RUNTIME_DIR/flexiq-scaled for the user's service manager.
func RuntimeDir(user bool) string {
	return serviceDir("RUNTIME_DIRECTORY", user, "XDG_RUNTIME_DIR", "/run/user/"+strconv.Itoa(os.Getuid()), "/run")
}

// serviceDir is the daemon's directory of one kind: what systemd set in env
// (RuntimeDirectory=, StateDirectory=, ...), else flexiq-scaled under the
// system's base, or under $userEnv (userDefault if unset) for the user's
// service manager.
func serviceDir(env string, user bool, userEnv, userDefault, system string) string {
	if d := os.Getenv(env); d != "" {
		// Several entries of the directive are joined with ':'.
		d, _, _ = strings.Cut(d, ":")
		return d
	}
	if user {
		base := os.Getenv(userEnv)
		if base == "" {
			base = userDefault
		}
		return filepath.Join(base, "flexiq-scaled")
	}
	return filepath.Join(system, "flexiq-scaled")
}

// StateDir is where the operator's overrides live: $STATE_DIRECTORY when
// systemd set it (StateDirectory=), else /var/lib/flexiq-scaled, or
// $XDG_STATE_HOME/flexiq-scaled for the user's service manager.
func StateDir(user bool) string {
	home, _ := os.UserHomeDir()
	return serviceDir("STATE_DIRECTORY", user, "XDG_STATE_HOME", filepath.Join(home, ".local", "state"), "/var/lib")
}

// serveControl opens the control sockets and serves them until ctx ends:
// control.sock for every user the groups admit, root.sock for root alone
// (so that no flood on the first can delay root's commands). A socket that
// cannot be opened costs the operator's commands, not the scaling: a
// warning.
func (d *daemon) serveControl(ctx context.Context) {
	srv := &ctlsock.Server{Backend: d, Auth: ctlsock.Authorizer{Owner: uint32(os.Geteuid()), WakeOf: wakeOf}, Logf: func(format string, args ...any) {
		d.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, format, args...)
	}}
	d.serveSocket(ctx, ctlsock.SocketName, ctlsock.Listen, srv.Serve,
		"flexiq-scaled status, explain, pause and pin will not work for the groups")
	d.serveSocket(ctx, ctlsock.RootSocketName, ctlsock.ListenRoot, srv.ServeRoot,
		"root's commands use control.sock")
}

func (d *daemon) serveSocket(ctx context.Context, name string, listen func(string) (net.Listener, error),
	serve func(context.Context, net.Listener) error, without string) {
	path := filepath.Join(d.opts.RuntimeDir, name)
	l, err := listen(path)
	if err != nil {
		d.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "%v: %s", err, without)
		return
	}
	go func() {
		if err := serve(ctx, l); err != nil {
			d.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "%s %s: %v", name, path, err)
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
	ps, err := d.poolsNamed(name)
	if err != nil {
		return nil, err
	}
	return views(ps), nil
}

// Status implements control.Backend.
func (d *daemon) Status(ctx context.Context, name string) ([]api.View, error) {
	ps, err := d.poolsNamed(name)
	if err != nil {
		return nil, err
	}
	vs := views(ps)
	withFleetMembers(ctx, ps, vs)
	return vs, nil
}

// views are the pools' snapshots.
func views(ps []*controller.Pool) []api.View {
	vs := make([]api.View, len(ps))
	for i, p := range ps {
		vs[i] = p.View()
		vs[i].Wake = p.ColdWake().View()
	}
	return vs
}

// poolsNamed is the pool called name, or every pool for "".
func (d *daemon) poolsNamed(name string) ([]*controller.Pool, error) {
	var ps []*controller.Pool
	if name != "" {
		p, err := d.pool(name)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	} else {
		for _, rp := range d.snapshot() {
			ps = append(ps, rp.pool)
		}
	}
	return ps, nil
}

// fleetMembersTimeout bounds the store reads that complete the fleet pools'
// views on a follower: a store that does not answer leaves the other
// hosts' counts unknown, and status is not held up.
const fleetMembersTimeout = 500 * time.Millisecond

// withFleetMembers completes, all at once, the views of the fleet pools
// this host follows with the other hosts' live counts and capacities.
func withFleetMembers(ctx context.Context, ps []*controller.Pool, vs []api.View) {
	ctx, cancel := context.WithTimeout(ctx, fleetMembersTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, p := range ps {
		if f := vs[i].Fleet; f == nil || f.IsLeader {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			vs[i] = p.WithFleetMembers(ctx, vs[i])
		}()
	}
	wg.Wait()
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

// reloadAsk is one Reload call waiting for its verdict; reply holds one, so
// that the loop never waits for an asker that left.
type reloadAsk struct {
	reply chan api.ReloadResponse
}

// Reload implements control.Backend: it hands the request to the signal
// loop, which alone reloads, and waits for the verdict. The loop takes
// every request waiting before it reads the file (see serveSignals), so
// this one is answered by a reload that read the file after it was made.
func (d *daemon) Reload(ctx context.Context) (api.ReloadResponse, error) {
	ask := reloadAsk{reply: make(chan api.ReloadResponse, 1)}
	select {
	case d.reloads <- ask:
	case <-d.loopDone:
		return api.ReloadResponse{}, errors.New("the daemon is stopping")
	case <-ctx.Done():
		return api.ReloadResponse{}, fmt.Errorf("waiting for a reload to start: %w", ctx.Err())
	}
	select {
	case v := <-ask.reply:
		return v, nil
	case <-ctx.Done():
		return api.ReloadResponse{}, fmt.Errorf("waiting for the reload's verdict: %w", ctx.Err())
	}
}

// queuedReloads returns asks with every reload request already waiting.
func (d *daemon) queuedReloads(asks []reloadAsk) []reloadAsk {
	for {
		select {
		case a := <-d.reloads:
			asks = append(asks, a)
		default:
			return asks
		}
	}
}

// answerAll gives every ask the verdict.
func answerAll(asks []reloadAsk, v api.ReloadResponse) {
	for _, a := range asks {
		a.reply <- v
	}
}
