package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingTransport counts the body bytes the check reads.
type countingTransport struct {
	next http.RoundTripper
	read atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.read}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// replicaServer serves the paths TestHTTPCheck probes; /away redirects
// to another server, whose requests otherHits counts.
func replicaServer(t *testing.T) (srv *httptest.Server, otherHits *atomic.Int64) {
	otherHits = new(atomic.Int64)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		otherHits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(other.Close)
	mux := http.NewServeMux()
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
	}
	mux.Handle("/ok", status(200))
	mux.Handle("/nocontent", status(204))
	mux.Handle("/found", status(302))
	mux.Handle("/missing", status(404))
	mux.Handle("/unavailable", status(503))
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/x", http.StatusFound)
	})
	mux.HandleFunc("/here", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/unavailable", http.StatusFound)
	})
	mux.HandleFunc("/hang", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/slowbody", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, _ *http.Request) {
		chunk := make([]byte, 32<<10)
		for { // endless: the check must stop reading, not the server writing
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/bigheader", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("a", 2*MaxHeaderBytes))
		w.WriteHeader(200)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, otherHits
}

func TestHTTPCheck(t *testing.T) {
	srv, otherHits := replicaServer(t)
	tests := []struct {
		path string
		want string // "" passes, else a substring of the error
	}{
		{"/ok", ""},
		{"/nocontent", ""},
		{"/found", ""},
		{"/missing", "status 404"},
		{"/unavailable", "status 503"},
		{"/away", ""}, // not followed to the other host: its 302 is ready
		{"/here", "status 503"},
		{"/hang", "deadline exceeded"},
		{"/slowbody", "reading the body"},
		{"/huge", ""},
		{"/bigheader", "header"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			client := NewHTTPClient()
			ct := &countingTransport{next: client.Transport}
			client.Transport = ct
			check, err := HTTPCheck(client, srv.URL+tc.path)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err = check(ctx)
			if tc.want == "" && err != nil {
				t.Fatalf("check = %v, want it to pass", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("check = %v, want an error with %q", err, tc.want)
			}
			if n := ct.read.Load(); n > MaxBody {
				t.Errorf("read %d body bytes, want at most %d", n, MaxBody)
			}
		})
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the other host got %d requests; a redirect across hosts must not be followed", n)
	}
}

// TestHTTPClientIgnoresProxyEnvironment checks the transport rather than
// a request: net/http reads the proxy variables once per process and never
// proxies 127.0.0.1 or localhost, so a request could not show it.
func TestHTTPClientIgnoresProxyEnvironment(t *testing.T) {
	tr, ok := NewHTTPClient().Transport.(*http.Transport)
	if !ok || tr.Proxy != nil {
		t.Fatalf("transport %T with a Proxy function: probes must not follow HTTP_PROXY", NewHTTPClient().Transport)
	}
	if tr.MaxResponseHeaderBytes != MaxHeaderBytes {
		t.Errorf("MaxResponseHeaderBytes = %d, want %d", tr.MaxResponseHeaderBytes, MaxHeaderBytes)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestTCPCheck(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	tests := []struct {
		name string
		port int
		pass bool
	}{
		{"listening", l.Addr().(*net.TCPAddr).Port, true},
		{"closed port", freePort(t), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := TCPCheck("127.0.0.1", tc.port)(ctx)
			if (err == nil) != tc.pass {
				t.Errorf("check = %v, want pass %v", err, tc.pass)
			}
		})
	}
}

func TestSpecCheck(t *testing.T) {
	var gotArgv []string
	exec := func(_ context.Context, argv []string) error {
		gotArgv = argv
		if argv[1] == "fail" {
			return errors.New("exit status 1")
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			w.WriteHeader(404)
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	ports := map[string]int{"http": port, "dead": freePort(t)}
	tests := []struct {
		name     string
		spec     Spec
		buildErr string
		pass     bool
	}{
		{"http", Spec{Kind: KindHTTP, Port: "http", Path: "/health"}, "", true},
		{"http wrong path", Spec{Kind: KindHTTP, Port: "http", Path: "/nope"}, "", false},
		{"tcp", Spec{Kind: KindTCP, Port: "http"}, "", true},
		{"tcp dead", Spec{Kind: KindTCP, Port: "dead"}, "", false},
		{"command passes", Spec{Kind: KindCommand, Command: []string{"/bin/check", "ok"}}, "", true},
		{"command fails", Spec{Kind: KindCommand, Command: []string{"/bin/check", "fail"}}, "", false},
		{"no such port", Spec{Kind: KindTCP, Port: "grpc"}, `no port "grpc"`, false},
		{"unknown kind", Spec{Kind: "udp"}, "unknown kind", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			check, err := tc.spec.Check("127.0.0.1", ports, NewHTTPClient(), exec)
			if tc.buildErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.buildErr) {
					t.Fatalf("Check = %v, want an error with %q", err, tc.buildErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := check(ctx); (err == nil) != tc.pass {
				t.Errorf("check = %v, want pass %v", err, tc.pass)
			}
		})
	}
	if len(gotArgv) != 2 || gotArgv[0] != "/bin/check" {
		t.Errorf("executor got %q, want the spec's command", gotArgv)
	}
	if _, err := CommandCheck(nil, []string{"/bin/true"}); err == nil {
		t.Error("CommandCheck without an executor: want an error")
	}
}
