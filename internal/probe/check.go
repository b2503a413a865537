package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
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
func HTTPCheck(client *http.Client, rawURL string) (Check, error) {
	if _, err := url.ParseRequestURI(rawURL); err != nil {
		return nil, fmt.Errorf("http probe: %w", err)
	}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return fmt.Errorf("http probe %s: %w", rawURL, err)
		}
		req.Header.Set("User-Agent", userAgent)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("http probe: %w", err)
		}
		_, rerr := io.CopyN(io.Discard, resp.Body, MaxBody)
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
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
