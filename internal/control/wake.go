package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/sockguard"
)

// WakeBackend is what a Backend adds for the pools' wake addresses (issue
// 29); a Backend without it answers those requests 404.
type WakeBackend interface {
	// Wake wakes the pool (req.Wake) and takes its wake process's report.
	// ErrNoPool for a pool that is not configured, ErrNoWake for one
	// without a wake address.
	Wake(pool string, req api.WakeRequest) (api.WakeResponse, error)
	// WakeReady returns the pool's ready replicas as the wake process
	// forwards to them, once their generation is not after, or when wait
	// has passed or ctx ended.
	WakeReady(ctx context.Context, pool string, after uint64, wait time.Duration) (api.WakeReady, error)
}

// ErrNoWake: the pool has no wake address.
var ErrNoWake = errors.New("the pool has no wake address ([pools.NAME.service.wake])")

// MaxWakeWait bounds a long poll of the ready replicas, under the
// client's timeout.
const MaxWakeWait = 25 * time.Second

// wakeAccess admits the pool's own wake process, and whoever has need
// (a wake is a change: it starts replicas; the ready replicas are a read).
func (s *Server) wakeAccess(need Access, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if p, ok := sockguard.PeerFrom(r.Context()); ok && s.Auth.IsWakeProcess(p, r.PathValue("pool")) {
			h(w, r)
			return
		}
		if _, ok := s.authorise(w, r, need); ok {
			h(w, r)
		}
	}
}

// wake is POST /v1/pools/{pool}/wake.
func (s *Server) wake(w http.ResponseWriter, r *http.Request) {
	wb, ok := s.Backend.(WakeBackend)
	if !ok {
		writeError(w, http.StatusNotFound, ErrNoWake.Error())
		return
	}
	var req api.WakeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return
	}
	resp, err := wb.Wake(r.PathValue("pool"), req)
	if err != nil {
		writeWakeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// wakeReady is GET /v1/pools/{pool}/wake/ready?after=N&wait_ms=M.
func (s *Server) wakeReady(w http.ResponseWriter, r *http.Request) {
	wb, ok := s.Backend.(WakeBackend)
	if !ok {
		writeError(w, http.StatusNotFound, ErrNoWake.Error())
		return
	}
	q := r.URL.Query()
	var after uint64
	var wait time.Duration
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("after: want a generation number, not %q", v))
			return
		}
		after = n
	}
	if v := q.Get("wait_ms"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("wait_ms: want milliseconds, not %q", v))
			return
		}
		wait = min(time.Duration(n)*time.Millisecond, MaxWakeWait)
	}
	ready, err := wb.WakeReady(r.Context(), r.PathValue("pool"), after, wait)
	if err != nil {
		writeWakeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ready)
}

func writeWakeError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNoWake) {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	writeBackendError(w, err)
}

// Wake asks the daemon to wake pool, with the wake process's counters.
func (c *Client) Wake(pool string, req api.WakeRequest) (api.WakeResponse, error) {
	var out api.WakeResponse
	return out, c.do(http.MethodPost, "/v1/pools/"+url.PathEscape(pool)+"/wake", req, &out)
}

// WakeReady reads the pool's ready replicas, waiting up to wait for a
// generation after after (0: answer at once).
func (c *Client) WakeReady(pool string, after uint64, wait time.Duration) (api.WakeReady, error) {
	var out api.WakeReady
	rc := *c
	if rc.Timeout <= 0 || rc.Timeout < wait+5*time.Second {
		rc.Timeout = wait + 5*time.Second
	}
	return out, rc.do(http.MethodGet, fmt.Sprintf("/v1/pools/%s/wake/ready?after=%d&wait_ms=%d",
		url.PathEscape(pool), after, wait.Milliseconds()), nil, &out)
}
