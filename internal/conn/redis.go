package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// Redis is a pooled connection to one Redis server, for every Redis
// source type (flexiq-redis included) and the fleet's coordination store
// (issue 20), which connects to the Redis the queue already lives in with
// the same credential keys, TLS (rediss://), Unix sockets, short timeouts,
// reply limit and error wording. go-redis keeps the pool and redials after
// a failure; the URL (with its password) is read again at each Client, so
// that a rotated password or URL file takes effect without a reload: a
// change replaces the client. Every connection the client makes, a
// wake-up's pub/sub one included, reads through a respLimiter.
type Redis struct {
	// typ and role name the connection in messages: "rq source
	// redis://…", "fleet store redis://…".
	typ, role string
	conn      config.Conn
	// replyBudget bounds one reply (respLimiter); tests lower it.
	replyBudget int64

	mu     sync.Mutex
	url    string // the URL the client was made for, password included
	server string // its redacted form, for messages
	c      *redis.Client
}

// NewRedis returns a connection to conn's server. typ and role name it in
// messages: ("rq", "source") gives "rq source redis://…: unreachable: …".
// It dials nothing until Client is called.
func NewRedis(typ, role string, conn config.Conn) *Redis {
	r := &Redis{typ: typ, role: role, conn: conn, replyBudget: redisReplyBudget}
	if u, err := url.Parse(conn.URL); err == nil && conn.URL != "" {
		r.server = Redacted(u)
	}
	return r
}

// Client returns the client for the current URL and credentials, read
// again at each call: a rotated password or URL file gives a new client
// (the old one is closed), so a caller that adds hooks must add them again
// when the pointer changes.
func (r *Redis) Client() (*redis.Client, error) {
	u, err := URL(r.conn)
	if err != nil {
		return nil, fmt.Errorf("%s %s %s: %w", r.typ, r.role, r.Server(), err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil && r.url == u.String() {
		return r.c, nil
	}
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		// ParseURL's messages may quote the URL: name the redacted one.
		return nil, fmt.Errorf("%s %s %s: not a Redis URL", r.typ, r.role, Redacted(u))
	}
	// Short timeouts: a hung server is a hold at the next tick, not a
	// stuck pool. The pool is small: a source runs one observation at a
	// time.
	opts.DialTimeout = 5 * time.Second
	opts.ReadTimeout = 5 * time.Second
	opts.WriteTimeout = 5 * time.Second
	opts.PoolSize = 2
	// One retry, for a pooled connection the server closed meanwhile;
	// no redials: a refused connection is a hold at once, and the next
	// tick tries again.
	opts.MaxRetries = 1
	opts.DialerRetries = 1
	// Plain RESP2: no HELLO, which older servers lack, and none of RESP3's
	// maps and attributes, which nothing here reads.
	opts.Protocol = 2
	// The client's own identification (CLIENT SETINFO) fails on older
	// servers; it is of no use here.
	opts.DisableIdentity = true
	// Every connection reads through a limiter: see redis_limit.go.
	dial, budget := redis.NewDialer(opts), r.replyBudget
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newRespLimiter(c, budget), nil
	}
	if r.c != nil {
		r.c.Close()
	}
	r.c, r.url, r.server = redis.NewClient(opts), u.String(), Redacted(u)
	return r.c, nil
}

// Server is the redacted server, for messages; before the first Client,
// where its URL comes from.
func (r *Redis) Server() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.server != "" {
		return r.server
	}
	switch {
	case r.conn.URLFile != "":
		return "(url_file " + r.conn.URLFile + ")"
	case r.conn.URLCredential != "":
		return "(url_credential " + r.conn.URLCredential + ")"
	}
	return "(no URL)"
}

// Fail wraps an error of the server's with what the connection is, the
// redacted server and what failed (unreachable, timed out, authentication
// failed, ...).
func (r *Redis) Fail(err error) error {
	what := "query failed"
	msg := err.Error()
	var ne net.Error
	var wt *WrongTypeError
	var big *ReplyTooLargeError
	switch {
	case errors.As(err, &big):
		what = "reply too large"
	case errors.As(err, &wt):
		what = "wrong key type"
	case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"),
		strings.Contains(msg, "invalid password"), strings.Contains(msg, "invalid username-password"),
		strings.HasPrefix(msg, "ERR AUTH"):
		what = "authentication failed"
	case strings.HasPrefix(msg, "WRONGTYPE"):
		what = "wrong key type"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		what = "timed out"
	case errors.As(err, &ne), strings.Contains(msg, "connection refused"), strings.Contains(msg, "EOF"),
		strings.Contains(msg, "no such file"), strings.Contains(msg, "connection reset"):
		what = "unreachable"
	case strings.HasPrefix(msg, "LOADING"):
		what = "server loading its data"
	}
	return fmt.Errorf("%s %s %s: %s: %w", r.typ, r.role, r.Server(), what, err)
}

// Close closes the current client.
func (r *Redis) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return nil
	}
	err := r.c.Close()
	r.c = nil
	return err
}

// WrongTypeError is a key that holds something the caller cannot read, an
// error that names the key, as Redis's own WRONGTYPE does not.
type WrongTypeError struct{ Key, Type, Want string }

func (e *WrongTypeError) Error() string {
	return fmt.Sprintf("WRONGTYPE: key %q is a %.64s, want %s", e.Key, e.Type, e.Want)
}
