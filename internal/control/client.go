package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// ErrNotRunning means nothing listens on the control socket.
var ErrNotRunning = errors.New("flexiq-scaled is not running")

// ErrOlderDaemon means the daemon does not know the request: it is older
// than this command (during a package upgrade, before its restart).
var ErrOlderDaemon = errors.New("the running daemon is older than this command and does not know this request")

// ReloadTimeout is how long Reload waits for the verdict by default: below
// systemd's default TimeoutStartSec= (90 s), which also bounds ExecReload=.
const ReloadTimeout = 60 * time.Second

// Error is an answer other than 200, with the daemon's message.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// Denied says whether err is a refusal for lack of permission.
func Denied(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusForbidden
}

// Client speaks to the daemon's control socket.
type Client struct {
	Socket string
	// Root, when set, is tried first: the root control socket
	// (RootSocketName), which only the daemon's owner may connect to.
	// Anyone else, or a daemon without one, is answered on Socket.
	Root    string
	Timeout time.Duration // per request; 10 s if zero
}

func (c *Client) http() *http.Client {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				if c.Root != "" {
					conn, err := dial(ctx, c.Root)
					if !fallBack(err) {
						return conn, err
					}
				}
				return dial(ctx, c.Socket)
			},
			DisableKeepAlives: true,
		},
	}
}

// Status reads the pools' snapshots (pool "" for all).
func (c *Client) Status(pool string) (api.StatusResponse, error) {
	var out api.StatusResponse
	path := "/v1/status"
	if pool != "" {
		path += "?pool=" + url.QueryEscape(pool)
	}
	return out, c.do(http.MethodGet, path, nil, &out)
}

// Explain reads a pool's last decisions.
func (c *Client) Explain(pool string, last int) (api.ExplainResponse, error) {
	var out api.ExplainResponse
	return out, c.do(http.MethodGet, fmt.Sprintf("/v1/pools/%s/explain?last=%d", url.PathEscape(pool), last), nil, &out)
}

// Change asks for a change of a pool: verb is pause, resume, pin, unpin or
// roll.
func (c *Client) Change(pool, verb string, req api.ChangeRequest) (api.ChangeResponse, error) {
	var out api.ChangeResponse
	return out, c.do(http.MethodPost, "/v1/pools/"+url.PathEscape(pool)+"/"+verb, req, &out)
}

// Reload asks the daemon to re-read its configuration and returns its
// verdict, waiting for it up to c.Timeout (ReloadTimeout if zero).
func (c *Client) Reload() (api.ReloadResponse, error) {
	var out api.ReloadResponse
	rc := *c
	if rc.Timeout <= 0 {
		rc.Timeout = ReloadTimeout
	}
	return out, rc.do(http.MethodPost, "/v1/reload", struct{}{}, &out)
}

func (c *Client) do(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://flexiq-scaled"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http().Do(req)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("%w (nothing listens on %s; systemctl status flexiq-scaled)", ErrNotRunning, c.Socket)
		}
		if errors.Is(err, syscall.EACCES) {
			return &Error{Status: http.StatusForbidden, Message: fmt.Sprintf("permission denied: cannot connect to %s", c.Socket)}
		}
		// The daemon closes a connection from a peer in neither group
		// at once; its 403 may be lost if this side was still writing.
		if denied := selfDenied(); denied != nil {
			return denied
		}
		return fmt.Errorf("talking to the daemon on %s: %w", c.Socket, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("reading the daemon's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e api.ErrorResponse
		if json.Unmarshal(b, &e) != nil && resp.StatusCode == http.StatusNotFound {
			// Every 404 of ours carries JSON; the mux's own, for a
			// path it does not know, does not.
			return fmt.Errorf("%w (%s %s)", ErrOlderDaemon, method, path)
		}
		if e.Error == "" {
			e.Error = fmt.Sprintf("the daemon answered %s", resp.Status)
		}
		return &Error{Status: resp.StatusCode, Message: e.Error}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("the daemon's answer is not what this command understands (%v): is it the same version?", err)
	}
	return nil
}

// dial connects to the socket, again while its backlog is full: a
// non-blocking connect(2) to a Unix socket fails with EAGAIN then rather
// than wait, which a flood of other users' connections could otherwise
// turn into a refusal of root's.
func dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	wait := 5 * time.Millisecond
	for {
		c, err := d.DialContext(ctx, "unix", path)
		if !errors.Is(err, syscall.EAGAIN) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// fallBack says whether a failed dial of the root control socket should
// try the control socket: the caller may not connect to it (EACCES), or
// the daemon has none (an older one, or it could not open it).
func fallBack(err error) bool {
	return errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// selfDenied is the daemon's refusal of this process, said here: nil for
// root and for a member of either group.
func selfDenied() error {
	if os.Geteuid() == 0 {
		return nil
	}
	groups, _ := os.Getgroups()
	p := Peer{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	for _, g := range groups {
		p.Groups = append(p.Groups, uint32(g))
	}
	if err := (Authorizer{}).Admit(p); err != nil {
		return &Error{Status: http.StatusForbidden, Message: err.Error()}
	}
	return nil
}
