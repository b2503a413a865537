package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flexiq/flexiq-scaled/internal/controller"
)

// SocketName is the control socket's name in the daemon's runtime directory.
const SocketName = "control.sock"

// ErrNoPool is returned by a Backend for a pool that is not configured.
var ErrNoPool = errors.New("no such pool")

// Backend is the daemon as the control interface sees it.
type Backend interface {
	// Views returns the pools' snapshots, sorted by name: all of them for
	// pool "", else the one (ErrNoPool if it is not configured).
	Views(pool string) ([]controller.View, error)
	Explain(pool string, last int) ([]controller.Explanation, error)
	// SetOverride pauses, pins or resumes a pool (controller.ErrOverride
	// for a refused one).
	SetOverride(pool string, o controller.Override) (controller.Override, error)
	// Roll asks for a rollout of the pools; it returns one line per pool.
	Roll(pools []string, reason string) ([]string, error)
}

// StatusResponse is GET /v1/status.
type StatusResponse struct {
	Pools []controller.View `json:"pools"`
}

// ExplainResponse is GET /v1/pools/POOL/explain.
type ExplainResponse struct {
	Pool      string                   `json:"pool"`
	Decisions []controller.Explanation `json:"decisions"`
}

// ChangeRequest is the body of POST /v1/pools/POOL/{pause,pin,roll}.
type ChangeRequest struct {
	// ForSec bounds a pause or pin, in seconds; 0 is until resumed.
	ForSec  float64 `json:"for_sec,omitempty"`
	Workers *int    `json:"workers,omitempty"` // pin
	Reason  string  `json:"reason,omitempty"`  // roll
}

// ChangeResponse answers a change.
type ChangeResponse struct {
	Pool     string               `json:"pool"`
	Override *controller.Override `json:"override"`
	Message  string               `json:"message"`
}

// ErrorResponse is the body of every 4xx and 5xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
}

// Server serves the control API.
type Server struct {
	Backend Backend
	Auth    Authorizer
	// Logf reports refused changes and failures, for the journal.
	Logf func(format string, args ...any)
	// Now is the wall clock for --for deadlines; nil is time.Now.
	Now func() time.Time
}

type peerKey struct{}

// Handler is the API, for a listener whose connections carry a Peer in
// their context (see Serve), or for tests that put one there.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.read(s.status))
	mux.HandleFunc("GET /v1/pools/{pool}/explain", s.read(s.explain))
	mux.HandleFunc("POST /v1/pools/{pool}/pause", s.change(s.pause))
	mux.HandleFunc("POST /v1/pools/{pool}/resume", s.change(s.resume))
	mux.HandleFunc("POST /v1/pools/{pool}/pin", s.change(s.pin))
	mux.HandleFunc("POST /v1/pools/{pool}/unpin", s.change(s.unpin))
	mux.HandleFunc("POST /v1/pools/{pool}/roll", s.change(s.roll))
	return mux
}

// WithPeer returns ctx carrying the peer, as Serve's ConnContext does.
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

func (s *Server) authorise(w http.ResponseWriter, r *http.Request, need Access) (Peer, bool) {
	p, ok := r.Context().Value(peerKey{}).(Peer)
	if !ok {
		writeError(w, http.StatusForbidden, "permission denied: the peer's credentials are unknown")
		return p, false
	}
	got, err := s.Auth.Access(p)
	if err != nil {
		s.logf("control: cannot tell the groups of %s: %v", p, err)
	}
	if got >= need {
		return p, true
	}
	group, what := ReadGroup, "reading the daemon's state"
	if need == ChangeAccess {
		group, what = AdminGroup, "changing a pool"
		if got == ReadAccess {
			s.logf("control: refused %s %s to %s: not a member of %s", r.Method, r.URL.Path, p, AdminGroup)
		}
	}
	writeError(w, http.StatusForbidden, fmt.Sprintf("permission denied: %s needs root or membership of group %s (uid %d is neither)", what, group, p.UID))
	return p, false
}

func (s *Server) read(h func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.authorise(w, r, ReadAccess); ok {
			h(w, r)
		}
	}
}

func (s *Server) change(h func(http.ResponseWriter, *http.Request, Peer, ChangeRequest)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.authorise(w, r, ChangeAccess)
		if !ok {
			return
		}
		var req ChangeRequest
		body := http.MaxBytesReader(w, r.Body, 64<<10)
		if err := json.NewDecoder(body).Decode(&req); err != nil && !errors.Is(err, io.EOF) /* an empty body: no fields */ {
			writeError(w, http.StatusBadRequest, "bad request body: "+err.Error())
			return
		}
		if req.ForSec < 0 {
			writeError(w, http.StatusBadRequest, "for_sec must not be negative")
			return
		}
		h(w, r, p, req)
	}
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	vs, err := s.Backend.Views(r.URL.Query().Get("pool"))
	if err != nil {
		writeBackendError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, StatusResponse{Pools: vs})
}

func (s *Server) explain(w http.ResponseWriter, r *http.Request) {
	pool := r.PathValue("pool")
	last := 10
	if q := r.URL.Query().Get("last"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("last: want a positive number, not %q", q))
			return
		}
		last = n
	}
	es, err := s.Backend.Explain(pool, last)
	if err != nil {
		writeBackendError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ExplainResponse{Pool: pool, Decisions: es})
}

func (s *Server) until(req ChangeRequest) time.Time {
	if req.ForSec == 0 {
		return time.Time{}
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return now().Add(time.Duration(req.ForSec * float64(time.Second))).Truncate(time.Second)
}

func (s *Server) setOverride(w http.ResponseWriter, pool string, o controller.Override, msg func(controller.Override) string) {
	got, err := s.Backend.SetOverride(pool, o)
	if err != nil {
		writeBackendError(w, err)
		return
	}
	resp := ChangeResponse{Pool: pool, Message: msg(got)}
	if got.Kind != controller.OverrideNone {
		resp.Override = &got
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request, p Peer, req ChangeRequest) {
	pool := r.PathValue("pool")
	s.setOverride(w, pool, controller.Override{Kind: controller.OverridePaused, Until: s.until(req), By: p.String()},
		func(o controller.Override) string { return fmt.Sprintf("pool %s %s", pool, o) })
}

func (s *Server) pin(w http.ResponseWriter, r *http.Request, p Peer, req ChangeRequest) {
	pool := r.PathValue("pool")
	if req.Workers == nil {
		writeError(w, http.StatusBadRequest, "pin: workers is missing")
		return
	}
	s.setOverride(w, pool, controller.Override{Kind: controller.OverridePinned, Workers: *req.Workers, Until: s.until(req), By: p.String()},
		func(o controller.Override) string { return fmt.Sprintf("pool %s %s", pool, o) })
}

// resume and unpin end an override of their own kind only: `resume` of a
// pinned pool would silently drop a pin that someone set on purpose.
func (s *Server) resume(w http.ResponseWriter, r *http.Request, p Peer, _ ChangeRequest) {
	s.end(w, r.PathValue("pool"), controller.OverridePaused, "resume", "unpin", p)
}

func (s *Server) unpin(w http.ResponseWriter, r *http.Request, p Peer, _ ChangeRequest) {
	s.end(w, r.PathValue("pool"), controller.OverridePinned, "unpin", "resume", p)
}

func (s *Server) end(w http.ResponseWriter, pool, kind, verb, other string, p Peer) {
	vs, err := s.Backend.Views(pool)
	if err != nil {
		writeBackendError(w, err)
		return
	}
	cur := vs[0].Override
	switch {
	case cur == nil:
		writeJSON(w, http.StatusOK, ChangeResponse{Pool: pool, Message: fmt.Sprintf("pool %s was not %s: nothing to do", pool, kind)})
		return
	case cur.Kind != kind:
		writeError(w, http.StatusConflict, fmt.Sprintf("pool %s is %s, not %s: use %s", pool, cur, kind, other))
		return
	}
	s.setOverride(w, pool, controller.Override{Kind: controller.OverrideNone, By: p.String()},
		func(controller.Override) string { return fmt.Sprintf("pool %s resumed scaling (was %s)", pool, cur) })
}

func (s *Server) roll(w http.ResponseWriter, r *http.Request, p Peer, req ChangeRequest) {
	pool := r.PathValue("pool")
	reason := req.Reason
	if reason == "" {
		reason = "flexiq-scaled roll by " + p.String()
	}
	lines, err := s.Backend.Roll([]string{pool}, reason)
	if err != nil {
		writeBackendError(w, err)
		return
	}
	msg := ""
	if len(lines) > 0 {
		msg = lines[0]
	}
	writeJSON(w, http.StatusOK, ChangeResponse{Pool: pool, Message: msg})
}

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

func writeBackendError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNoPool):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, controller.ErrOverride):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorResponse{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Listen opens the control socket at path, replacing a stale one that a
// killed daemon left behind, world-writable (every request is authorised by
// its peer's credentials instead: see Authorizer).
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	// The daemon's UMask=0077 made it 0600: only root could connect.
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return l, nil
}

// Serve serves the API on l until ctx ends, then closes it (waiting at most
// a few seconds for requests under way).
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       30 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if p, err := peerOf(c); err == nil {
				return WithPeer(ctx, p)
			}
			return ctx // no peer: every request is refused
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	err := srv.Serve(l)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// peerOf reads SO_PEERCRED: the credentials of the process that connected,
// as the kernel recorded them at connect(2).
func peerOf(c net.Conn) (Peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Peer{}, errors.New("not a Unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if serr != nil {
		return Peer{}, serr
	}
	return Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}
