package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// fakeBackend is one pool, "email", with max_workers 10.
type fakeBackend struct {
	o      api.Override
	reload func(context.Context) (api.ReloadResponse, error)
}

func (b *fakeBackend) Views(pool string) ([]api.View, error) {
	if pool != "" && pool != "email" {
		return nil, fmt.Errorf("%w: %q", ErrNoPool, pool)
	}
	v := api.View{Pool: "email", Mode: "active", WorkerList: []api.WorkerView{}}
	if b.o.Kind != "" {
		o := b.o
		v.Mode, v.Override = o.Kind, &o
	}
	return []api.View{v}, nil
}

func (b *fakeBackend) Explain(pool string, last int) ([]api.Explanation, error) {
	if pool != "email" {
		return nil, ErrNoPool
	}
	return []api.Explanation{{Action: "stable", Steps: []api.Step{{Name: "depth", Value: "1"}}}}, nil
}

func (b *fakeBackend) SetOverride(pool string, o api.Override) (api.Override, error) {
	if pool != "email" {
		return api.Override{}, ErrNoPool
	}
	if o.Kind == api.OverridePinned && o.Workers > 10 {
		return b.o, fmt.Errorf("%w: pin %d above max_workers", api.ErrOverride, o.Workers)
	}
	b.o = o
	return o, nil
}

func (b *fakeBackend) Roll(pools []string, reason string) ([]string, error) {
	return []string{"pool email: rollout requested"}, nil
}

func (b *fakeBackend) Status(_ context.Context, pool string) ([]api.View, error) {
	return b.Views(pool)
}

func (b *fakeBackend) Reload(ctx context.Context) (api.ReloadResponse, error) {
	if b.reload != nil {
		return b.reload(ctx)
	}
	return api.ReloadResponse{OK: true, Changes: []string{"nothing changed"}}, nil
}

// The groups of the table: 100 is flexiq-scaled, 101 flexiq-scaled-admin.
var testAuth = Authorizer{
	GroupID: func(name string) (uint32, error) {
		switch name {
		case ReadGroup:
			return 100, nil
		case AdminGroup:
			return 101, nil
		}
		return 0, errors.New("no such group")
	},
}

var (
	root    = Peer{PID: 1, UID: 0, GID: 0}
	reader  = Peer{PID: 2, UID: 1000, GID: 1000, Groups: []uint32{1000, 100}} // a supplementary group
	admin   = Peer{PID: 3, UID: 1001, GID: 1001, Groups: []uint32{1001, 101}}
	nobody  = Peer{PID: 4, UID: 65534, GID: 65534}
	primary = Peer{PID: 5, UID: 1002, GID: 100} // flexiq-scaled as its primary group
)

func TestAuthorisation(t *testing.T) {
	type call struct{ method, path, body string }
	status := call{"GET", "/v1/status", ""}
	explain := call{"GET", "/v1/pools/email/explain?last=5", ""}
	pause := call{"POST", "/v1/pools/email/pause", `{"for_sec": 600}`}
	pin := call{"POST", "/v1/pools/email/pin", `{"workers": 3}`}
	roll := call{"POST", "/v1/pools/email/roll", `{}`}
	reload := call{"POST", "/v1/reload", ""}
	cases := []struct {
		peer *Peer
		c    call
		want int
	}{
		{&root, status, 200}, {&root, pause, 200}, {&root, pin, 200}, {&root, roll, 200}, {&root, reload, 200},
		{&admin, status, 200}, {&admin, explain, 200}, {&admin, pause, 200}, {&admin, roll, 200}, {&admin, reload, 200},
		{&reader, status, 200}, {&reader, explain, 200}, {&reader, pause, 403}, {&reader, pin, 403}, {&reader, roll, 403}, {&reader, reload, 403},
		{&primary, status, 200}, {&primary, pause, 403}, {&primary, reload, 403},
		{&nobody, status, 403}, {&nobody, explain, 403}, {&nobody, pause, 403}, {&nobody, reload, 403},
		{nil, status, 403}, // no credentials: nothing
	}
	for _, tc := range cases {
		name := "no peer"
		if tc.peer != nil {
			name = fmt.Sprintf("uid %d", tc.peer.UID)
		}
		t.Run(name+" "+tc.c.method+" "+tc.c.path, func(t *testing.T) {
			s := &Server{Backend: &fakeBackend{}, Auth: testAuth}
			req := httptest.NewRequest(tc.c.method, tc.c.path, strings.NewReader(tc.c.body))
			if tc.peer != nil {
				req = req.WithContext(WithPeer(req.Context(), *tc.peer))
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("%d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if rec.Code == 403 {
				var e api.ErrorResponse
				if json.Unmarshal(rec.Body.Bytes(), &e) != nil || !strings.HasPrefix(e.Error, "permission denied: ") {
					t.Errorf("403 without a clear message: %s", rec.Body)
				}
				group := ReadGroup
				if tc.c.method == "POST" {
					group = AdminGroup
				}
				if tc.peer != nil && !strings.Contains(e.Error, "group "+group) {
					t.Errorf("403 does not name group %s: %s", group, e.Error)
				}
			}
		})
	}
}

func TestChanges(t *testing.T) {
	b := &fakeBackend{}
	now := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	s := &Server{Backend: b, Auth: testAuth, Now: func() time.Time { return now }}
	do := func(method, path, body string) (int, string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req = req.WithContext(WithPeer(req.Context(), admin))
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	cases := []struct {
		method, path, body string
		code               int
		contains           string
	}{
		{"POST", "/v1/pools/nope/pause", "", 404, "no such pool"},
		{"GET", "/v1/status?pool=nope", "", 404, "no such pool"},
		{"GET", "/v1/pools/email/explain?last=0", "", 400, "positive"},
		{"POST", "/v1/pools/email/pin", `{}`, 400, "workers is missing"},
		{"POST", "/v1/pools/email/pin", `{"workers": 11}`, 400, "max_workers"},
		{"POST", "/v1/pools/email/pause", `{"for_sec": -1}`, 400, "negative"},
		// A year at most: 1e12 s overflowed into a deadline in 1734.
		{"POST", "/v1/pools/email/pause", `{"for_sec": 1e12}`, 400, "longer than a year"},
		{"POST", "/v1/pools/email/pin", `{"workers": 2, "for_sec": 31536001}`, 400, "longer than a year"},
		{"POST", "/v1/pools/email/pause", `{"for_sec": 1e400}`, 400, "bad request body"},
		{"POST", "/v1/pools/email/roll", `{"reason": "deploy\nflexiq-scaled: forged"}`, 400, "control characters"},
		{"POST", "/v1/pools/email/roll", `{"reason": "` + strings.Repeat("x", 201) + `"}`, 400, "at most 200"},
		{"POST", "/v1/pools/email/pause", `{"for_sec": 31536000}`, 200, `"until": "2027-12-01T15:00:00Z"`},
		{"POST", "/v1/pools/email/pause", `{"for_sec": 600}`, 200, `"until": "2026-12-01T15:10:00Z"`},
		{"POST", "/v1/pools/email/unpin", "", 409, "use resume"},
		{"POST", "/v1/pools/email/resume", "", 200, "resumed scaling"},
		{"POST", "/v1/pools/email/resume", "", 200, "nothing to do"},
		{"POST", "/v1/pools/email/pin", `{"workers": 3}`, 200, `"workers": 3`},
		{"POST", "/v1/pools/email/resume", "", 409, "use unpin"},
		{"POST", "/v1/pools/email/unpin", "", 200, "resumed scaling"},
		{"GET", "/v1/pools/email/explain", "", 200, `"decisions"`},
		{"GET", "/v1/status", "", 200, `"pools"`},
	}
	for _, tc := range cases {
		code, body := do(tc.method, tc.path, tc.body)
		if code != tc.code || !strings.Contains(body, tc.contains) {
			t.Errorf("%s %s %s: %d %s, want %d with %q", tc.method, tc.path, tc.body, code, body, tc.code, tc.contains)
		}
	}
	if b.o.By == "" || !strings.Contains(b.o.By, "uid 1001") {
		t.Errorf("the override does not say who set it: %+v", b.o)
	}
}

// TestSocket serves on a real Unix socket: the peer is the test process,
// as SO_PEERCRED reports it, and the socket is world-writable.
func TestSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, SocketName)
	c := &Client{Socket: path, Timeout: 5 * time.Second}
	if _, err := c.Status(""); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("no socket: %v, want ErrNotRunning", err)
	}
	// A stale socket of a killed daemon is replaced.
	if l, err := Listen(path); err != nil {
		t.Fatal(err)
	} else {
		l.Close()
	}
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("socket mode: %v %v", fi.Mode(), err)
	}
	s := &Server{Backend: &fakeBackend{}, Auth: testAuth}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	resp, err := c.Status("")
	switch {
	case os.Getuid() == 0 && err != nil:
		t.Errorf("root refused: %v", err)
	case os.Getuid() == 0 && (len(resp.Pools) != 1 || resp.Pools[0].Pool != "email"):
		t.Errorf("status: %+v", resp)
	case os.Getuid() != 0 && !Denied(err):
		t.Errorf("uid %d with no group: %v, want permission denied", os.Getuid(), err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := c.Status(""); !errors.Is(err, ErrNotRunning) {
		t.Errorf("after the stop: %v, want ErrNotRunning", err)
	}
}

// A peer's groups are the kernel's, from connect(2), and nothing else: a
// user whom /etc/group lists in the admin group, but whose connecting
// process was not in it (it dropped it, or handed the socket to a child and
// exited, after which the old code asked NSS), gets nothing. The user is
// any member of a group in this machine's /etc/group.
func TestGroupsOnlyFromKernel(t *testing.T) {
	b, err := os.ReadFile("/etc/group")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) != 4 || f[3] == "" {
			continue
		}
		gid, err1 := strconv.ParseUint(f[2], 10, 32)
		u, err2 := user.Lookup(strings.Split(f[3], ",")[0])
		if err1 != nil || err2 != nil || u.Uid == "0" || u.Gid == f[2] {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		primary, _ := strconv.ParseUint(u.Gid, 10, 32)
		a := Authorizer{GroupID: func(name string) (uint32, error) {
			if name == AdminGroup {
				return uint32(gid), nil
			}
			return 0, errors.New("no such group")
		}}
		gone := Peer{PID: 1 << 30, UID: uint32(uid), GID: uint32(primary)} // no such process
		if got := a.Access(gone); got != NoAccess {
			t.Errorf("%s, listed in group %s (%d) by /etc/group, connected without it: access %d, want none", u.Username, f[0], gid, got)
		}
		if err := a.Admit(gone); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("Admit: %v, want permission denied", err)
		}
		gone.Groups = []uint32{uint32(gid)}
		if got := a.Access(gone); got != ChangeAccess {
			t.Errorf("with the group from the kernel: access %d, want change", got)
		}
		return
	}
	t.Skip("no group in /etc/group lists a member whose primary group it is not")
}

// rootBackend answers as fakeBackend, but its pool is "root", so that a
// test can tell which socket answered.
type rootBackend struct{ fakeBackend }

func (b *rootBackend) Status(ctx context.Context, pool string) ([]api.View, error) {
	vs, err := b.fakeBackend.Status(ctx, pool)
	for i := range vs {
		vs[i].Pool = "root"
	}
	return vs, err
}

// TestRootSocket: the client asks root.sock first, which is mode 0600, and
// control.sock when root.sock is not there or nothing listens on it (a
// daemon older than root.sock, or one killed). That a user other than the
// owner is refused by the file's mode and answered on control.sock is
// test/faults' TestSocketFlood (it needs another user).
func TestRootSocket(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the daemon's owner is root here; this test serves both sockets as the daemon would")
	}
	dir := t.TempDir()
	ctl, root := filepath.Join(dir, SocketName), filepath.Join(dir, RootSocketName)
	c := &Client{Socket: ctl, Root: root, Timeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serve := func(listen func(string) (net.Listener, error), serve func(*Server) func(context.Context, net.Listener) error, b Backend, path string) net.Listener {
		l, err := listen(path)
		if err != nil {
			t.Fatal(err)
		}
		go serve(&Server{Backend: b, Auth: testAuth})(ctx, l)
		return l
	}
	answeredBy := func() string {
		t.Helper()
		resp, err := c.Status("")
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		if len(resp.Pools) != 1 {
			t.Fatalf("status: %+v", resp)
		}
		return resp.Pools[0].Pool
	}
	serve(Listen, func(s *Server) func(context.Context, net.Listener) error { return s.Serve }, &fakeBackend{}, ctl)
	if got := answeredBy(); got != "email" {
		t.Errorf("no root.sock: answered by %q, want control.sock", got)
	}
	rl := serve(ListenRoot, func(s *Server) func(context.Context, net.Listener) error { return s.ServeRoot }, &rootBackend{}, root)
	if fi, err := os.Stat(root); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("root.sock's mode: %v, want 0600", fi.Mode())
	}
	if got := answeredBy(); got != "root" {
		t.Errorf("with root.sock: answered by %q, want root.sock", got)
	}
	// A killed daemon's root.sock stays behind, refusing connections.
	rl.(*net.UnixListener).SetUnlinkOnClose(false)
	rl.Close()
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("the stale root.sock: %v", err)
	}
	if got := answeredBy(); got != "email" {
		t.Errorf("stale root.sock: answered by %q, want control.sock", got)
	}
}

// Only root and the owner pass the root control socket's guard, whatever
// their groups.
func TestAdmitOwner(t *testing.T) {
	a := Authorizer{Owner: 1000, GroupID: testAuth.GroupID}
	admin, _ := testAuth.GroupID(AdminGroup)
	for _, tc := range []struct {
		name string
		p    Peer
		ok   bool
	}{
		{"root", Peer{UID: 0}, true},
		{"owner", Peer{UID: 1000, GID: 1000}, true},
		{"an admin", Peer{UID: 1001, GID: 1001, Groups: []uint32{admin}}, false},
		{"nobody", Peer{UID: 65534, GID: 65534}, false},
	} {
		err := a.AdmitOwner(tc.p)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want admitted=%v", tc.name, err, tc.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), SocketName)) {
			t.Errorf("%s: %q does not say what to use instead", tc.name, err)
		}
	}
}
