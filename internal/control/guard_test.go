package control

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/sockguard"
)

// countingListener counts the bytes the server reads from its connections.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &l.read}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// guarded serves s on a real Unix socket the way the daemon does (Guard),
// but with the peers the test plays: each accepted connection is the next
// peer sent on the returned channel, in the order the test dials (a Unix
// socket's backlog is first in, first out).
type guarded struct {
	t      *testing.T
	path   string
	peers  chan Peer
	ln     *countingListener
	logMu  sync.Mutex
	logged []string
	served atomic.Int64
}

func serveGuarded(t *testing.T, s *Server) *guarded {
	t.Helper()
	g := &guarded{t: t, path: filepath.Join(t.TempDir(), SocketName), peers: make(chan Peer, 1024)}
	l, err := Listen(g.path)
	if err != nil {
		t.Fatal(err)
	}
	g.ln = &countingListener{Listener: l}
	s.Logf = func(format string, args ...any) {
		g.logMu.Lock()
		defer g.logMu.Unlock()
		g.logged = append(g.logged, fmt.Sprintf(format, args...))
	}
	cfg := s.Guard()
	cfg.PeerOf = func(net.Conn) (Peer, error) { return <-g.peers, nil }
	h := s.Handler()
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.served.Add(1)
		h.ServeHTTP(w, r)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cfg.Serve(ctx, g.ln, counted)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return g
}

// dial connects as p; send is written at once (it may be a request's
// beginning only).
func (g *guarded) dial(p Peer, send string) net.Conn {
	g.t.Helper()
	g.peers <- p
	c, err := net.Dial("unix", g.path)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { c.Close() })
	// A refused peer may find the connection closed before it writes
	// (EPIPE); its answer is still there to read.
	io.WriteString(c, send)
	return c
}

// answer reads one response from c, within a few seconds.
func answer(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// closed says whether the server has closed c (EOF, or a reset where it
// closed with our bytes unread), waiting up to within for it.
func closed(c net.Conn, within time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(within))
	_, err := io.ReadAll(c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

const statusReq = "GET /v1/status HTTP/1.1\r\nHost: flexiq-scaled\r\n\r\n"

// A peer in neither group is answered and closed at accept: the server
// never reads a byte of what it sent, and no handler runs. (The attack of
// issue 17: 1,013 connections from nobody, each read before being refused,
// starved root's status and the daemon's descriptors.)
func TestRefusedBeforeRead(t *testing.T) {
	g := serveGuarded(t, &Server{Backend: &fakeBackend{}, Auth: testAuth})
	for i := range 50 {
		c := g.dial(nobody, statusReq+strings.Repeat("X", 1000))
		code, body := answer(t, c)
		if code != http.StatusForbidden || !strings.Contains(body, "permission denied") || !strings.Contains(body, "group "+ReadGroup) {
			t.Fatalf("connection %d from nobody: %d %s, want 403 naming group %s", i, code, body, ReadGroup)
		}
		if !closed(c, 2*time.Second) {
			t.Fatalf("connection %d from nobody still open after its 403", i)
		}
	}
	if n := g.ln.read.Load(); n != 0 {
		t.Errorf("the server read %d bytes from refused peers, want 0", n)
	}
	if n := g.served.Load(); n != 0 {
		t.Errorf("%d requests of refused peers reached the handler", n)
	}
	// The refusals cost one journal line, not fifty.
	g.logMu.Lock()
	if len(g.logged) != 1 || !strings.Contains(g.logged[0], "uid 65534") {
		t.Errorf("refusals logged as %q, want one line naming uid 65534", g.logged)
	}
	g.logMu.Unlock()
	// A reader is still served.
	if code, body := answer(t, g.dial(reader, statusReq)); code != 200 {
		t.Errorf("reader after the flood: %d %s", code, body)
	}
}

// The caps: 16 connections per uid; 128 for all but root, whose own 16 are
// kept whoever fills the rest; a closed connection gives its slot back.
func TestConnectionCaps(t *testing.T) {
	t.Run("per uid", func(t *testing.T) {
		g := serveGuarded(t, &Server{Backend: &fakeBackend{}, Auth: testAuth})
		per := sockguard.DefaultLimits.PerUID
		var held []net.Conn
		for range per {
			// Headers that never end: each holds its slot until the
			// header timeout.
			held = append(held, g.dial(reader, "GET /v1/status HTTP/1.1\r\n"))
		}
		code, body := answer(t, g.dial(reader, statusReq))
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "too many connections") {
			t.Fatalf("uid 1000's connection %d: %d %s, want 503", per+1, code, body)
		}
		if code, body := answer(t, g.dial(primary, statusReq)); code != 200 {
			t.Errorf("another reader while uid 1000 is at its cap: %d %s", code, body)
		}
		held[0].Close()
		ok := false
		for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			code, _ := answer(t, g.dial(reader, statusReq))
			ok = code == 200
		}
		if !ok {
			t.Error("a closed connection did not give its slot back")
		}
	})
	t.Run("total", func(t *testing.T) {
		lim := sockguard.DefaultLimits
		lim.PerUID, lim.Total = 4, 8
		g := serveGuarded(t, &Server{Backend: &fakeBackend{}, Auth: testAuth, Limits: lim})
		for i := range lim.Total {
			g.dial(Peer{PID: int32(100 + i), UID: uint32(2000 + i), GID: 100}, "GET /v1/status HTTP/1.1\r\n")
		}
		late := Peer{PID: 99, UID: 3000, GID: 100}
		if code, body := answer(t, g.dial(late, statusReq)); code != http.StatusServiceUnavailable {
			t.Errorf("a reader past the total: %d %s, want 503", code, body)
		}
		// Root's own slots: it is served while the others hold the
		// total, up to its per-uid cap.
		for i := range lim.PerUID - 1 {
			g.dial(Peer{PID: int32(200 + i), UID: 0, GID: 0}, "GET /v1/status HTTP/1.1\r\n")
		}
		if code, body := answer(t, g.dial(root, statusReq)); code != 200 {
			t.Errorf("root while the total is held: %d %s, want 200", code, body)
		}
	})
}

// Headers are bounded in size (431 past MaxHeaderBytes, not a 1 MiB buffer
// per connection) and in time (a peer that trickles them is closed).
func TestHeaderLimits(t *testing.T) {
	lim := sockguard.DefaultLimits
	lim.ReadHeaderTimeout = 300 * time.Millisecond
	g := serveGuarded(t, &Server{Backend: &fakeBackend{}, Auth: testAuth, Limits: lim})
	big := "GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 64<<10) + "\r\n\r\n"
	if code, _ := answer(t, g.dial(reader, big)); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KiB of headers: %d, want 431", code)
	}
	if n := g.ln.read.Load(); n > int64(lim.MaxHeaderBytes)+8<<10 {
		t.Errorf("the server read %d bytes of a 64 KiB header, want about %d", n, lim.MaxHeaderBytes+4096)
	}
	c := g.dial(reader, "GET /v1/status HTTP/1.1\r\nX-Slow: ")
	t0 := time.Now()
	go func() {
		for range 20 {
			if _, err := c.Write([]byte("a")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if !closed(c, 3*time.Second) {
		t.Error("a peer trickling its headers was not closed")
	} else if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("a peer trickling its headers was closed after %s, want about %s", d, lim.ReadHeaderTimeout)
	}
}

// The request path is the peer's: the journal gets it quoted, so that a
// member of the read group cannot write lines of its own into it.
func TestLogQuoting(t *testing.T) {
	g := serveGuarded(t, &Server{Backend: &fakeBackend{}, Auth: testAuth})
	req := "POST /v1/pools/email%0Aflexiq-scaled:%20pool%20email%20pinned%20by%20root/pause HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
	if code, body := answer(t, g.dial(reader, req)); code != http.StatusForbidden {
		t.Fatalf("a reader's pause: %d %s, want 403", code, body)
	}
	g.logMu.Lock()
	defer g.logMu.Unlock()
	if len(g.logged) == 0 {
		t.Fatal("the refused change was not logged")
	}
	for _, l := range g.logged {
		if strings.ContainsAny(l, "\n\r") {
			t.Errorf("a log line carries the peer's newline: %q", l)
		}
	}
	if !strings.Contains(g.logged[len(g.logged)-1], `"/v1/pools/email\nflexiq-scaled:`) {
		t.Errorf("the path is not quoted: %q", g.logged[len(g.logged)-1])
	}
}
