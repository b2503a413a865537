package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/sockguard"
)

// SocketName is the control socket's name in the daemon's runtime directory.
const SocketName = "control.sock"

// RootSocketName is the root control socket's: the same API as SocketName,
// for the daemon's owner alone (mode 0600), with a listen queue and an
// accept loop of its own. Every local user may connect to control.sock
// (its mode is 0666, and peers are judged at accept), so a flood of
// refused connections fills its queue, and root's request would wait
// behind them; on root.sock it waits for nobody. systemd keeps
// /run/systemd/private beside the bus for its own root commands for the
// same reason.
const RootSocketName = "root.sock"

// ErrNoPool is returned by a Backend for a pool that is not configured.
var ErrNoPool = errors.New("no such pool")

// Backend is the daemon as the control interface sees it.
type Backend interface {
	// Views returns the pools' snapshots, sorted by name: all of them for
	// pool "", else the one (ErrNoPool if it is not configured).
	Views(pool string) ([]api.View, error)
	// Status is Views completed with what status shows beyond the
	// snapshots (a fleet follower's view of the other hosts, read from
	// the fleet's store), within ctx.
	Status(ctx context.Context, pool string) ([]api.View, error)
	Explain(pool string, last int) ([]api.Explanation, error)
	// SetOverride pauses, pins or resumes a pool (api.ErrOverride
	// for a refused one).
	SetOverride(pool string, o api.Override) (api.Override, error)
	// Roll asks for a rollout of the pools; it returns one line per pool.
	Roll(pools []string, reason string) ([]string, error)
	// Reload re-reads the configuration, by a reload that starts after
	// the call, and returns its verdict; an error only if ctx ended (the
	// asker left, or the daemon stops) before there was one.
	Reload(ctx context.Context) (api.ReloadResponse, error)
}

// MaxForSec is the longest pause or pin with a deadline: a year. Longer
// ones would overflow a time.Duration, and are no deadline a person means.
const MaxForSec = 365 * 24 * 3600

// maxReason bounds a roll's reason, which goes into the journal.
const maxReason = 200

// Server serves the control API.
type Server struct {
	Backend Backend
	Auth    Authorizer
	// Logf reports refused changes and failures, for the journal.
	Logf func(format string, args ...any)
	// Now is the wall clock for --for deadlines; nil is time.Now.
	Now func() time.Time
	// Limits bound the socket's connections; zero is
	// sockguard.DefaultLimits.
	Limits sockguard.Limits
}

// Handler is the API, for a listener whose connections carry a Peer in
// their context (see Guard), or for tests that put one there.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.read(s.status))
	mux.HandleFunc("GET /v1/pools/{pool}/explain", s.read(s.explain))
	mux.HandleFunc("POST /v1/pools/{pool}/pause", s.change(s.pause))
	mux.HandleFunc("POST /v1/pools/{pool}/resume", s.change(s.resume))
	mux.HandleFunc("POST /v1/pools/{pool}/pin", s.change(s.pin))
	mux.HandleFunc("POST /v1/pools/{pool}/unpin", s.change(s.unpin))
	mux.HandleFunc("POST /v1/pools/{pool}/roll", s.change(s.roll))
	mux.HandleFunc("POST /v1/reload", s.change(s.reload))
	mux.HandleFunc("POST /v1/pools/{pool}/wake", s.wakeAccess(ChangeAccess, s.wake))
	mux.HandleFunc("GET /v1/pools/{pool}/wake/ready", s.wakeAccess(ReadAccess, s.wakeReady))
	return mux
}

// WithPeer returns ctx carrying the peer, as Serve's ConnContext does.
func WithPeer(ctx context.Context, p Peer) context.Context {
	return sockguard.WithPeer(ctx, p)
}

func (s *Server) authorise(w http.ResponseWriter, r *http.Request, need Access) (Peer, bool) {
	p, ok := sockguard.PeerFrom(r.Context())
	if !ok {
		writeError(w, http.StatusForbidden, "permission denied: the peer's credentials are unknown")
		return p, false
	}
	got := s.Auth.Access(p)
	if got >= need {
		return p, true
	}
	group, what := ReadGroup, "reading the daemon's state"
	if need == ChangeAccess {
		group, what = AdminGroup, "changing a pool"
		if got == ReadAccess {
			// The path is the peer's: quoted, so that it cannot
			// write lines of its own into the journal.
			s.logf("control: refused %q %q to %s: not a member of %s", r.Method, r.URL.Path, p, AdminGroup)
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

func (s *Server) change(h func(http.ResponseWriter, *http.Request, Peer, api.ChangeRequest)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.authorise(w, r, ChangeAccess)
		if !ok {
			return
		}
		var req api.ChangeRequest
		body := http.MaxBytesReader(w, r.Body, 64<<10)
		if err := json.NewDecoder(body).Decode(&req); err != nil && !errors.Is(err, io.EOF) /* an empty body: no fields */ {
			writeError(w, http.StatusBadRequest, "bad request body: "+err.Error())
			return
		}
		if err := checkChange(req); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		h(w, r, p, req)
	}
}

// checkChange refuses what the handlers cannot take: a deadline beyond a year
// (which would overflow into the past), and a reason that would put
// control characters or pages into the journal.
func checkChange(req api.ChangeRequest) error {
	switch {
	case req.ForSec < 0:
		return errors.New("for_sec must not be negative")
	case req.ForSec > MaxForSec:
		return fmt.Errorf("for_sec: %g s is longer than a year (at most %d s); leave it out to hold until resumed", req.ForSec, MaxForSec)
	case len(req.Reason) > maxReason:
		return fmt.Errorf("reason: %d bytes, at most %d", len(req.Reason), maxReason)
	case strings.ContainsFunc(req.Reason, isControl):
		return fmt.Errorf("reason: %q has control characters (a newline?): one line of text, please", req.Reason)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	vs, err := s.Backend.Status(r.Context(), r.URL.Query().Get("pool"))
	if err != nil {
		writeBackendError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.StatusResponse{Pools: vs})
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
	writeJSON(w, http.StatusOK, api.ExplainResponse{Pool: pool, Decisions: es})
}

func (s *Server) until(req api.ChangeRequest) time.Time {
	if req.ForSec == 0 {
		return time.Time{}
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return now().Add(time.Duration(req.ForSec * float64(time.Second))).Truncate(time.Second)
}

func (s *Server) setOverride(w http.ResponseWriter, pool string, o api.Override, msg func(api.Override) string) {
	got, err := s.Backend.SetOverride(pool, o)
	if err != nil {
		writeBackendError(w, err)
		return
	}
	resp := api.ChangeResponse{Pool: pool, Message: msg(got)}
	if got.Kind != api.OverrideNone {
		resp.Override = &got
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request, p Peer, req api.ChangeRequest) {
	pool := r.PathValue("pool")
	s.setOverride(w, pool, api.Override{Kind: api.OverridePaused, Until: s.until(req), By: p.String()},
		func(o api.Override) string { return fmt.Sprintf("pool %s %s", pool, o) })
}

func (s *Server) pin(w http.ResponseWriter, r *http.Request, p Peer, req api.ChangeRequest) {
	pool := r.PathValue("pool")
	if req.Workers == nil {
		writeError(w, http.StatusBadRequest, "pin: workers is missing")
		return
	}
	s.setOverride(w, pool, api.Override{Kind: api.OverridePinned, Workers: *req.Workers, Until: s.until(req), By: p.String()},
		func(o api.Override) string { return fmt.Sprintf("pool %s %s", pool, o) })
}

// resume and unpin end an override of their own kind only: `resume` of a
// pinned pool would silently drop a pin that someone set on purpose.
func (s *Server) resume(w http.ResponseWriter, r *http.Request, p Peer, _ api.ChangeRequest) {
	s.end(w, r.PathValue("pool"), api.OverridePaused, "resume", "unpin", p)
}

func (s *Server) unpin(w http.ResponseWriter, r *http.Request, p Peer, _ api.ChangeRequest) {
	s.end(w, r.PathValue("pool"), api.OverridePinned, "unpin", "resume", p)
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
		writeJSON(w, http.StatusOK, api.ChangeResponse{Pool: pool, Message: fmt.Sprintf("pool %s was not %s: nothing to do", pool, kind)})
		return
	case cur.Kind != kind:
		writeError(w, http.StatusConflict, fmt.Sprintf("pool %s is %s, not %s: use %s", pool, cur, kind, other))
		return
	}
	s.setOverride(w, pool, api.Override{Kind: api.OverrideNone, By: p.String()},
		func(api.Override) string { return fmt.Sprintf("pool %s resumed scaling (was %s)", pool, cur) })
}

func (s *Server) roll(w http.ResponseWriter, r *http.Request, p Peer, req api.ChangeRequest) {
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
	writeJSON(w, http.StatusOK, api.ChangeResponse{Pool: pool, Message: msg})
}

// ReloadWait bounds how long the daemon holds a reload's connection open
// for the verdict: beyond the socket's WriteTimeout, which is sized for
// answers that need no waiting, and at least as long as a client waits by
// default (ReloadTimeout).
const ReloadWait = ReloadTimeout + 5*time.Second

func (s *Server) reload(w http.ResponseWriter, r *http.Request, _ Peer, _ api.ChangeRequest) {
	// Without this the verdict of a reload stuck behind a slow tick
	// could not be written.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(ReloadWait))
	ctx, cancel := context.WithTimeout(r.Context(), ReloadWait)
	defer cancel()
	v, err := s.Backend.Reload(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "no verdict: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, v)
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
	case errors.Is(err, api.ErrOverride):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, api.ErrorResponse{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Listen opens the control socket at path, replacing a stale one that a
// killed daemon left behind. It is world-writable because it serves two
// groups (a file has one): every connection is judged at accept by its
// peer's credentials (see Guard), and one from a peer in neither group is
// closed before a byte of it is read.
func Listen(path string) (net.Listener, error) {
	l, err := sockguard.Listen(path, 0o666, -1)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return l, nil
}

// ListenRoot opens the root control socket at path (RootSocketName), mode
// 0600: the kernel refuses every other user's connect(2), so none of them
// reaches its queue.
func ListenRoot(path string) (net.Listener, error) {
	l, err := sockguard.Listen(path, 0o600, -1)
	if err != nil {
		return nil, fmt.Errorf("root control socket: %w", err)
	}
	return l, nil
}

// Guard is how the socket is served: peers that may do nothing are refused
// at accept, and every peer's connections are capped (s.Limits).
func (s *Server) Guard() sockguard.Config {
	return s.guard("control socket", s.Auth.Admit)
}

// RootGuard is how the root control socket is served: as Guard, but only
// the owner is admitted (should the file's mode ever be widened).
func (s *Server) RootGuard() sockguard.Config {
	return s.guard("root control socket", s.Auth.AdmitOwner)
}

func (s *Server) guard(name string, admit func(Peer) error) sockguard.Config {
	lim := s.Limits
	if lim == (sockguard.Limits{}) {
		lim = sockguard.DefaultLimits
	}
	return sockguard.Config{Name: name, Limits: lim, Admit: admit, Logf: s.Logf}
}

// Serve serves the API on l until ctx ends, then closes it (waiting at most
// a few seconds for requests under way).
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	return s.Guard().Serve(ctx, l, s.Handler())
}

// ServeRoot serves the API on the root control socket l until ctx ends.
func (s *Server) ServeRoot(ctx context.Context, l net.Listener) error {
	return s.RootGuard().Serve(ctx, l, s.Handler())
}
