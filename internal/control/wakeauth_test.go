package control

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// wakeBackend adds a wake address to pools "email" and "web".
type wakeBackend struct{ fakeBackend }

func (b *wakeBackend) Wake(pool string, _ api.WakeRequest) (api.WakeResponse, error) {
	if pool != "email" && pool != "web" {
		return api.WakeResponse{}, ErrNoPool
	}
	return api.WakeResponse{Pool: pool, Woken: true}, nil
}

func (b *wakeBackend) WakeReady(_ context.Context, pool string, _ uint64, _ time.Duration) (api.WakeReady, error) {
	return api.WakeReady{Generation: 1}, nil
}

// The wake process of pool "web" is a dynamic user (uid 61500) in no group
// of ours; the daemon knows it by its cgroup, here by its PID.
var wakeWeb = Peer{PID: 77, UID: 61500, GID: 61500}

// TestWakeProcessAccess: a pool's wake process may wake its own pool and
// read its ready replicas, nothing else; it is admitted at accept, where a
// peer in no group is refused. Root and the admin group keep their access.
func TestWakeProcessAccess(t *testing.T) {
	auth := testAuth
	auth.WakeOf = func(p Peer) (string, bool) { return "web", p.PID == wakeWeb.PID && p.UID == wakeWeb.UID }
	if err := auth.Admit(wakeWeb); err != nil {
		t.Errorf("the wake process refused at accept: %v", err)
	}
	if err := auth.Admit(nobody); err == nil {
		t.Errorf("nobody admitted at accept")
	}
	if err := auth.AdmitOwner(wakeWeb); err == nil {
		t.Errorf("the wake process admitted on root.sock")
	}
	cases := []struct {
		peer         Peer
		method, path string
		want         int
	}{
		{wakeWeb, "POST", "/v1/pools/web/wake", 200},
		{wakeWeb, "GET", "/v1/pools/web/wake/ready?after=0", 200},
		{wakeWeb, "POST", "/v1/pools/email/wake", 403},
		{wakeWeb, "GET", "/v1/pools/email/wake/ready", 403},
		{wakeWeb, "GET", "/v1/status", 403},
		{wakeWeb, "GET", "/v1/pools/web/explain", 403},
		{wakeWeb, "POST", "/v1/pools/web/pin", 403},
		{wakeWeb, "POST", "/v1/reload", 403},
		{nobody, "POST", "/v1/pools/web/wake", 403},
		{reader, "POST", "/v1/pools/web/wake", 403},
		{reader, "GET", "/v1/pools/web/wake/ready", 200},
		{admin, "POST", "/v1/pools/email/wake", 200},
		{root, "POST", "/v1/pools/web/wake", 200},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("uid %d %s %s", tc.peer.UID, tc.method, tc.path), func(t *testing.T) {
			s := &Server{Backend: &wakeBackend{}, Auth: auth}
			body := ""
			if tc.method == "POST" {
				body = `{"wake": true}`
				if strings.HasSuffix(tc.path, "/pin") {
					body = `{"workers": 1}`
				}
			}
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(body))
			req = req.WithContext(WithPeer(req.Context(), tc.peer))
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("%d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
		})
	}
}
