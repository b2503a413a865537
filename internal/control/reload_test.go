package control

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/sockguard"
)

// serveForTest serves h on a socket in a temporary directory, every
// connection carrying the admin peer, and returns a client for it.
func serveForTest(t *testing.T, h http.Handler) *Client {
	t.Helper()
	path := filepath.Join(t.TempDir(), SocketName)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
		return sockguard.WithPeer(ctx, admin)
	}}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return &Client{Socket: path}
}

// The verdict travels whole, a rejection included, and the server holds
// the connection until the backend has one, however long the reload takes
// beyond a plain request's timeout.
func TestReloadVerdict(t *testing.T) {
	verdict := api.ReloadResponse{Problems: []string{"/etc/flexiq-scaled/config.toml: pools.email.max_worker: unknown key"}}
	b := &fakeBackend{reload: func(ctx context.Context) (api.ReloadResponse, error) {
		time.Sleep(200 * time.Millisecond)
		return verdict, nil
	}}
	c := serveForTest(t, (&Server{Backend: b, Auth: testAuth}).Handler())
	c.Timeout = 5 * time.Second
	v, err := c.Reload()
	if err != nil || v.OK || len(v.Problems) != 1 || v.Problems[0] != verdict.Problems[0] {
		t.Fatalf("rejected: %+v, %v", v, err)
	}
	verdict = api.ReloadResponse{OK: true, Changes: []string{"pool email: max_workers"}}
	if v, err := c.Reload(); err != nil || !v.OK || v.Changes[0] != "pool email: max_workers" {
		t.Fatalf("accepted: %+v, %v", v, err)
	}
}

// No verdict (the daemon stops meanwhile) is an error, never a success.
func TestReloadWithoutVerdict(t *testing.T) {
	b := &fakeBackend{reload: func(context.Context) (api.ReloadResponse, error) {
		return api.ReloadResponse{}, errors.New("the daemon is stopping")
	}}
	c := serveForTest(t, (&Server{Backend: b, Auth: testAuth}).Handler())
	if v, err := c.Reload(); err == nil || !strings.Contains(err.Error(), "the daemon is stopping") {
		t.Fatalf("got %+v, %v; want an error", v, err)
	}
}

// A daemon from before reload went over the socket answers its mux's
// plain-text 404: the client says so, rather than "no such pool" or a
// garbled answer.
func TestReloadOfOlderDaemon(t *testing.T) {
	old := http.NewServeMux()
	old.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"pools": []}`)) })
	c := serveForTest(t, old)
	if _, err := c.Reload(); !errors.Is(err, ErrOlderDaemon) {
		t.Fatalf("err = %v, want ErrOlderDaemon", err)
	}
	// Our own 404s are still the daemon's messages.
	c = serveForTest(t, (&Server{Backend: &fakeBackend{}, Auth: testAuth}).Handler())
	if _, err := c.Explain("nosuch", 1); errors.Is(err, ErrOlderDaemon) || err == nil {
		t.Fatalf("err = %v, want the daemon's no such pool", err)
	}
}

func TestReloadNotRunning(t *testing.T) {
	c := &Client{Socket: filepath.Join(t.TempDir(), SocketName)}
	if _, err := c.Reload(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("err = %v, want ErrNotRunning", err)
	}
}
