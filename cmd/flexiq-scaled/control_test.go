package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/control"
)

// fakeDaemon is the daemon as the commands see it: one pool, "email".
type fakeDaemon struct {
	verdict api.ReloadResponse
	reloads int
	rolled  []string
	reasons []string
}

func (f *fakeDaemon) Views(pool string) ([]api.View, error) {
	return []api.View{{Pool: "email", WorkerList: []api.WorkerView{}}}, nil
}
func (f *fakeDaemon) Explain(string, int) ([]api.Explanation, error) { return nil, nil }
func (f *fakeDaemon) SetOverride(string, api.Override) (api.Override, error) {
	return api.Override{}, nil
}
func (f *fakeDaemon) Roll(pools []string, reason string) ([]string, error) {
	if pools[0] != "email" {
		return nil, control.ErrNoPool
	}
	f.rolled = append(f.rolled, pools...)
	f.reasons = append(f.reasons, reason)
	return []string{"pool email: rollout requested"}, nil
}
func (f *fakeDaemon) Status(_ context.Context, pool string) ([]api.View, error) {
	return f.Views(pool)
}

func (f *fakeDaemon) Reload(context.Context) (api.ReloadResponse, error) {
	f.reloads++
	return f.verdict, nil
}

// serveControl serves the control API for d on a socket in a temporary
// runtime directory, every connection from peer, and returns the
// --runtime-dir flags. Old unit files' --pid comes along, to be ignored.
func serveControl(t *testing.T, d control.Backend, peer control.Peer) []string {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, control.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: (&control.Server{Backend: d, Auth: control.Authorizer{GroupID: func(string) (uint32, error) { return 101, nil }}}).Handler(),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context { return control.WithPeer(ctx, peer) }}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return []string{"--runtime-dir", dir, "--timeout", "10s", "--pid", "1"}
}

var (
	rootPeer  = control.Peer{PID: 1, UID: 0}
	adminPeer = control.Peer{PID: 2, UID: 1001, GID: 1001, Groups: []uint32{101}}
)

func TestReloadCommand(t *testing.T) {
	d := &fakeDaemon{verdict: api.ReloadResponse{OK: true, Changes: []string{"pool email: max_workers"}}}
	flags := serveControl(t, d, rootPeer)

	r := invoke(t, append([]string{"reload"}, flags...)...)
	if r.code != 0 || r.stdout != "pool email: max_workers\n" || r.stderr != "" || d.reloads != 1 {
		t.Errorf("accepted reload: %v (%d reloads)", r, d.reloads)
	}

	d.verdict = api.ReloadResponse{Problems: []string{"/etc/flexiq-scaled/config.toml: pools.email.max_worker: unknown key"}}
	r = invoke(t, append([]string{"reload"}, flags...)...)
	if r.code != 1 || r.stdout != "" ||
		r.stderr != "flexiq-scaled reload: configuration rejected; the daemon keeps running on the old one:\n"+
			"/etc/flexiq-scaled/config.toml: pools.email.max_worker: unknown key\n" {
		t.Errorf("rejected reload: %v", r)
	}
	// A partly applied reload prints both, and fails.
	d.verdict = api.ReloadResponse{Changes: []string{"pool email: source"}, Problems: []string{"pool email: cannot open"}}
	r = invoke(t, append([]string{"reload"}, flags...)...)
	if r.code != 1 || r.stdout != "pool email: source\n" || r.stderr != "pool email: cannot open\n" {
		t.Errorf("partial reload: %v", r)
	}
}

// A member of the admin group reloads and rolls as root does.
func TestControlAsAdmin(t *testing.T) {
	d := &fakeDaemon{verdict: api.ReloadResponse{OK: true, Changes: []string{"nothing changed"}}}
	flags := serveControl(t, d, adminPeer)
	if r := invoke(t, append([]string{"reload"}, flags...)...); r.code != 0 || r.stdout != "nothing changed\n" {
		t.Errorf("reload: %v", r)
	}
	if r := invoke(t, append([]string{"roll"}, append(flags, "email")...)...); r.code != 0 || !strings.Contains(r.stdout, "rollout requested") {
		t.Errorf("roll: %v", r)
	}
	// Someone in the read group only is refused.
	flags = serveControl(t, d, control.Peer{PID: 3, UID: 1002, GID: 1002})
	if r := invoke(t, append([]string{"reload"}, flags...)...); r.code != 1 || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("reload by a reader: %v", r)
	}
}

func TestRollCommand(t *testing.T) {
	d := &fakeDaemon{}
	flags := serveControl(t, d, rootPeer)
	r := invoke(t, append(append([]string{"roll", "--reason", "deploy 42"}, flags...), "email")...)
	if r.code != 0 || !strings.Contains(r.stdout, "rollout requested") || len(d.rolled) != 1 || d.reasons[0] != "deploy 42" {
		t.Errorf("roll: %v (rolled %v, reasons %q)", r, d.rolled, d.reasons)
	}
	// Every pool is checked before any is rolled.
	r = invoke(t, append(append([]string{"roll"}, flags...), "email", "nope")...)
	if r.code != 1 || !strings.Contains(r.stderr, "refused, nothing rolled") || !strings.Contains(r.stderr, "no such pool: nope") || len(d.rolled) != 1 {
		t.Errorf("roll of an unknown pool: %v (rolled %v)", r, d.rolled)
	}
	if r := invoke(t, "roll"); r.code != 2 {
		t.Errorf("roll without a pool: %v", r)
	}
}

// Without a running daemon the commands fail at once and say so, and never
// signal a process that is not flexiq-scaled.
func TestControlWithoutDaemon(t *testing.T) {
	dir := t.TempDir()
	r := invoke(t, "reload", "--runtime-dir", dir, "--pid", strconv.Itoa(os.Getpid()))
	if r.code != 1 || !strings.Contains(r.stderr, "not running") {
		t.Errorf("reload: %v", r)
	}
	r = invoke(t, "roll", "--runtime-dir", dir, "email")
	if r.code != 1 || !strings.Contains(r.stderr, "not running") {
		t.Errorf("roll: %v", r)
	}
}

// A daemon from before reload went over the socket (met during a package
// upgrade, until its restart) gets a plain SIGHUP, but only if the PID is
// flexiq-scaled's: never this test process.
func TestReloadOfOlderDaemon(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, control.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NewServeMux()} // every path: a plain 404
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	t.Setenv("MAINPID", strconv.Itoa(os.Getpid()))
	r := invoke(t, "reload", "--runtime-dir", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "older than this command") || !strings.Contains(r.stderr, "systemctl restart") {
		t.Errorf("older daemon: %v", r)
	}
}
