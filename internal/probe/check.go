package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// A Check is one attempt: nil means it passed. It must return once ctx is
// done; the Prober gives each attempt a context bounded by the timeout.
type Check func(ctx context.Context) error

// An Executor runs a probe command (argv[0] an absolute path) and returns
// nil when it exits 0. The daemon's executor runs it as a transient unit
// through internal/units, so that it is bounded, accounted and killed with
// its unit; it must stop the command when ctx is done.
type Executor func(ctx context.Context, argv []string) error

// Bounds on what a replica can make the daemon read. A health answer is a
// few bytes; the body is read (rather than dropped) only so that the
// connection can be reused, and a larger one closes it.
const (
	MaxBody        = 64 << 10
	MaxHeaderBytes = 64 << 10
	maxRedirects   = 5
	userAgent      = "flexiq-scaled-probe/1"
)

// NewHTTPClient is the client that every HTTP check of a Prober shares: one
// transport, so connections to each replica are kept alive between
// attempts (a handshake per attempt would cost more CPU than the request).
// It ignores HTTP_PROXY and friends (the daemon's environment must not
// route probes elsewhere), bounds response headers, and follows redirects
// only to the same host and port: a redirect elsewhere is answered by its
// own 3xx status, as a Kubernetes probe does, and the daemon never
// connects to a host that a replica names.
func NewHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            (&net.Dialer{}).DialContext,
		MaxIdleConnsPerHost:    1,
		MaxIdleConns:           0, // no total cap: one idle connection per replica
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: MaxHeaderBytes,
		DisableCompression:     true, // a small bounded read needs no gzip
		ForceAttemptHTTP2:      false,
	}
	return &http.Client{Transport: tr, CheckRedirect: sameHost}
}

func sameHost(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host || len(via) > maxRedirects {
		return http.ErrUseLastResponse
	}
	return nil
}

// HTTPURL is the URL an HTTP probe requests: http://address:port/path.
func HTTPURL(address string, port int, path string) string {
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(address, strconv.Itoa(port))}
	return u.String() + path
}

// HTTPCheck GETs rawURL with client (NewHTTPClient): a 2xx or 3xx status
// passes. At most MaxBody bytes of the body are read.
//
// The attempt's context bounds all of its I/O: net/http ties the dial, the
// request and the response (body included) to it, and, for what net/http
// hands over (a 101 Switching Protocols gives the caller the raw
// connection, which no deadline of net/http covers), every connection the
// attempt took is closed when its context ends. A 1xx answer is a failure:
// 101 is the only one net/http returns (it reads past 100 and 103 to the
// final answer), and a replica that switches its health path to another
// protocol has not said it is ready.
func HTTPCheck(client *http.Client, rawURL string) (Check, error) {
	if _, err := url.ParseRequestURI(rawURL); err != nil {
		return nil, fmt.Errorf("http probe: %w", err)
	}
	return func(ctx context.Context) error {
		ctx, guard := guardConns(ctx)
		defer guard.release()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return fmt.Errorf("http probe %s: %w", rawURL, err)
		}
		req.Header.Set("User-Agent", userAgent)
		resp, err := client.Do(req)
		if err != nil && ctx.Err() != nil {
			// Whichever closed the connection first, the transport or
			// the guard, the timeout is why.
			return fmt.Errorf("http probe %s: no answer within the timeout: %w", rawURL, ctx.Err())
		}
		if err != nil {
			return fmt.Errorf("http probe: %w", err)
		}
		if resp.StatusCode < 200 {
			// Unread: a 101's body is the connection itself.
			resp.Body.Close()
			return fmt.Errorf("http probe %s: status %d: an informational answer, not a final one", rawURL, resp.StatusCode)
		}
		_, rerr := io.CopyN(io.Discard, resp.Body, MaxBody)
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			return fmt.Errorf("http probe %s: status %d", rawURL, resp.StatusCode)
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) && ctx.Err() != nil {
			// The status came in time but the body did not: the attempt
			// outlived its timeout.
			return fmt.Errorf("http probe %s: reading the body: %w", rawURL, rerr)
		}
		return nil
	}, nil
}

// connGuard closes the connections an attempt took once its context ends,
// unless the attempt has returned first (release): after that a
// kept-alive connection is the transport's again, and the next attempt's.
type connGuard struct {
	mu       sync.Mutex
	released bool
	stops    []func() bool
}

// guardConns returns ctx with a trace that puts every connection a request
// gets (a new one, or a kept-alive one reused) under the guard.
func guardConns(ctx context.Context) (context.Context, *connGuard) {
	g := &connGuard{}
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		c := info.Conn
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.released {
			g.stops = append(g.stops, context.AfterFunc(ctx, func() { c.Close() }))
		}
	}}
	return httptrace.WithClientTrace(ctx, trace), g
}

func (g *connGuard) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released = true
	for _, stop := range g.stops {
		stop()
	}
	g.stops = nil
}

// TCPCheck passes when a TCP connection to address:port opens.
func TCPCheck(address string, port int) Check {
	hostport := net.JoinHostPort(address, strconv.Itoa(port))
	var d net.Dialer
	return func(ctx context.Context) error {
		c, err := d.DialContext(ctx, "tcp", hostport)
		if err != nil {
			return fmt.Errorf("tcp probe: %w", err)
		}
		return c.Close()
	}
}

// CommandCheck passes when exec runs argv and it exits 0.
func CommandCheck(exec Executor, argv []string) (Check, error) {
	if exec == nil {
		return nil, errors.New("command probe: no executor")
	}
	if len(argv) == 0 {
		return nil, errors.New("command probe: empty command")
	}
	argv = append([]string(nil), argv...)
	return func(ctx context.Context) error {
		if err := exec(ctx, argv); err != nil {
			return fmt.Errorf("command probe %s: %w", argv[0], err)
		}
		return nil
	}, nil
}

// Check builds the check that s describes for a replica reached at address
// whose ports are ports (name → number). client serves KindHTTP, exec
// KindCommand; either may be nil when s does not need it.
func (s Spec) Check(address string, ports map[string]int, client *http.Client, exec Executor) (Check, error) {
	port := func() (int, error) {
		p, ok := ports[s.Port]
		if !ok || p < 1 || p > 65535 {
			return 0, fmt.Errorf("%s probe: the replica has no port %q", s.Kind, s.Port)
		}
		return p, nil
	}
	switch s.Kind {
	case KindHTTP:
		p, err := port()
		if err != nil {
			return nil, err
		}
		if client == nil {
			return nil, errors.New("http probe: no client")
		}
		return HTTPCheck(client, HTTPURL(address, p, s.Path))
	case KindTCP:
		p, err := port()
		if err != nil {
			return nil, err
		}
		return TCPCheck(address, p), nil
	case KindCommand:
		return CommandCheck(exec, s.Command)
	}
	return nil, fmt.Errorf("probe: unknown kind %q", s.Kind)
}
