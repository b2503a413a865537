package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// hugeProm is a hostile Prometheus that answers every query with size
// bytes, streamed from one small buffer (the test itself allocates
// nothing), announcing the length or not.
func hugeProm(t *testing.T, size int64, announce bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if announce {
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		}
		chunk := []byte(`{"status":"success","data":{"resultType":"vector","result":[` + strings.Repeat(" ", 64<<10))
		for sent := int64(0); sent < size; {
			n := min(int64(len(chunk)), size-sent)
			if _, err := w.Write(chunk[:n]); err != nil {
				return // the client gave up
			}
			sent += n
			chunk = chunk[:cap(chunk)]
			for i := range chunk {
				chunk[i] = ' '
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A 512 MiB answer was read whole (2 GiB allocated as the buffer grew); now
// a body over promMaxBody fails the query, a hold, having cost about the
// limit.
func TestPrometheusHugeBody(t *testing.T) {
	for _, announce := range []bool{false, true} {
		t.Run("announced="+strconv.FormatBool(announce), func(t *testing.T) {
			u := hugeProm(t, 512<<20, announce)
			s := mustNew(t, config.Source{Type: TypePrometheus, Settings: PrometheusSettings{Conn: config.Conn{URL: u},
				PendingQuery: "q"}})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := s.Observe(ctx, time.Now())
			runtime.ReadMemStats(&after)
			wantErrContaining(t, err, "pending_query q", "over the limit of 1048576")
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("one query allocated %d MiB", alloc>>20)
			}
		})
	}
	// A body of exactly the limit is read (and here, being padding, is
	// not JSON): the limit errs only past it.
	u := hugeProm(t, promMaxBody, false)
	s := mustNew(t, config.Source{Type: TypePrometheus, Settings: PrometheusSettings{Conn: config.Conn{URL: u}, PendingQuery: "q"}})
	_, err := s.Observe(context.Background(), time.Now())
	if err == nil || strings.Contains(err.Error(), "over the limit") {
		t.Errorf("a body of exactly the limit: err = %v, want a parse error, not the limit's", err)
	}
}

// authRecorder is a server that records the Authorization header of every
// request it gets.
type authRecorder struct {
	mu   sync.Mutex
	auth []string
}

func (a *authRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.auth = append(a.auth, r.Header.Get("Authorization"))
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"status":"success","data":` + promVector("5") + `}`))
}

func (a *authRecorder) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.auth...)
}

// A Prometheus that answered with a 302 to another host had the client
// follow it with the basic-authentication credentials, so the other host
// received the user and password. A redirect to another host (or port, or
// scheme) is now refused, and the credentials are only ever added to
// requests for the configured server; a redirect on the same server is
// still followed, with them.
func TestPrometheusRedirectKeepsCredentials(t *testing.T) {
	thief := &authRecorder{}
	other := httptest.NewServer(thief)
	t.Cleanup(other.Close)
	home := &authRecorder{}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/query", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/api/v1/query", http.StatusFound)
	})
	mux.HandleFunc("/same/api/v1/query", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/prefix/api/v1/query", http.StatusTemporaryRedirect)
	})
	mux.Handle("/prefix/api/v1/query", home)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withUser := strings.Replace(srv.URL, "http://", "http://metrics@", 1)

	s := mustNew(t, config.Source{Type: TypePrometheus, Settings: PrometheusSettings{Conn: config.Conn{URL: withUser, PasswordFile: pw},
		PendingQuery: "q"}})
	_, err := s.Observe(context.Background(), time.Now())
	wantErrContaining(t, err, "refusing a redirect", "to another server")
	if got := thief.seen(); len(got) > 0 {
		t.Fatalf("the other host received %d requests, with Authorization %q", len(got), got)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error shows the password: %v", err)
	}

	// The same server's redirect is followed, with the credentials.
	s = mustNew(t, config.Source{Type: TypePrometheus, Settings: PrometheusSettings{Conn: config.Conn{URL: withUser + "/same", PasswordFile: pw},
		PendingQuery: "q"}})
	c, err := s.Observe(context.Background(), time.Now())
	if err != nil || c.Pending != 5 {
		t.Fatalf("through a redirect on the same server: %+v, %v; want 5 pending", c, err)
	}
	if got := home.seen(); len(got) != 1 || got[0] == "" {
		t.Errorf("the redirect's target on the same server got Authorization %q, want the credentials once", got)
	}

	// Even if something followed a redirect elsewhere, the credentials
	// would not go with it.
	rt := basicAuth{next: http.DefaultTransport, scheme: "http", host: strings.TrimPrefix(srv.URL, "http://"), user: "metrics", password: "hunter2"}
	req, _ := http.NewRequest(http.MethodGet, other.URL+"/api/v1/query", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := thief.seen(); len(got) != 1 || got[0] != "" {
		t.Errorf("a request to another host carried Authorization %q", got)
	}
}
