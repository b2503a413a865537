package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/redis/go-redis/v9"
)

// The Redis family: the connection (redisConn) and the counting (countKeys)
// that every Redis type shares: the generic redis type (redis_keys.go), its
// presets (bullmq.go, celery.go, rq.go, sidekiq.go) and flexiq-redis.

// redisSchemes are go-redis's: TCP, TLS, and a Unix socket.
var redisSchemes = []string{"redis", "rediss", "unix"}

// queuesKey documents the queues key of the Redis presets, which need it.
func redisQueuesKey(what string) config.KeyDoc {
	return config.KeyDoc{Name: "queues", Type: "array of strings", Required: true, Limits: "at least one; no empty names",
		Doc: "The queues to read, summed: " + what + "."}
}

// decodeRedisQueues reads a preset's queues, which it needs: it cannot
// list a server's queues by itself.
func decodeRedisQueues(d *config.SourceDecoder, dst *[]string) {
	d.Queues(dst)
	if len(*dst) == 0 && !(d.Has("queues") && !isArray(d.Raw("queues"))) {
		d.Errorf("queues", "required for %s sources: the queues to read (summed)", d.Type())
	}
}

func isArray(raw any) bool {
	switch raw.(type) {
	case []any, []map[string]any:
		return true
	}
	return false
}

// redisCount is one key to count: a list, set or hash by its length, a
// sorted set by its cardinality or, with zrange, by ZCOUNT over it.
type redisCount struct {
	key    string
	zrange *[2]string
}

// countKeys counts keys, in two round trips: their types, then their
// lengths. A missing key counts 0. A key of another type (a string, a
// stream) is an error that names it, as Redis's own WRONGTYPE does not.
func countKeys(ctx context.Context, c *redis.Client, keys []redisCount) ([]int64, error) {
	types := make([]*redis.StatusCmd, len(keys))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			types[i] = p.Type(ctx, k.key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	lens := make([]*redis.IntCmd, len(keys))
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			typ := types[i].Val()
			if k.zrange != nil && typ != "zset" && typ != "none" {
				return &wrongTypeError{key: k.key, typ: typ, want: "a sorted set, for its score range"}
			}
			switch typ {
			case "none":
			case "list":
				lens[i] = p.LLen(ctx, k.key)
			case "set":
				lens[i] = p.SCard(ctx, k.key)
			case "hash":
				lens[i] = p.HLen(ctx, k.key)
			case "zset":
				if k.zrange != nil {
					lens[i] = p.ZCount(ctx, k.key, k.zrange[0], k.zrange[1])
				} else {
					lens[i] = p.ZCard(ctx, k.key)
				}
			default:
				return &wrongTypeError{key: k.key, typ: typ, want: "a list, a sorted set, a set or a hash"}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	n := make([]int64, len(keys))
	for i, l := range lens {
		if l != nil {
			n[i] = l.Val()
		}
	}
	return n, nil
}

// wrongTypeError is a key that holds something the source cannot count.
type wrongTypeError struct{ key, typ, want string }

func (e *wrongTypeError) Error() string {
	return fmt.Sprintf("WRONGTYPE: key %q is a %.64s, want %s", e.key, e.typ, e.want)
}

// redisConn is a source's pooled connection to its server, for every
// Redis source type (flexiq-redis included). go-redis keeps the pool and
// redials after a failure; the URL (with its password) is read again at
// each observation, so that a rotated password or URL file takes effect
// without a reload: a change replaces the client. Every connection the
// client makes, the wake-up's pub/sub one included, reads through a
// respLimiter.
type redisConn struct {
	typ string
	// role names the connection in messages: "source", or "store" for
	// the fleet's coordination store (RedisClient).
	role string
	conn config.Conn
	// rearm tells the wake-up that the server answers again.
	rearm *rearm
	// replyBudget bounds one reply (respLimiter); tests lower it.
	replyBudget int64

	mu     sync.Mutex
	url    string // the URL the client was made for, password included
	server string // its redacted form, for messages
	c      *redis.Client
}

func newRedisConn(typ string, conn config.Conn) *redisConn {
	r := &redisConn{typ: typ, role: "source", conn: conn, rearm: newRearm(), replyBudget: redisReplyBudget}
	if u, err := url.Parse(conn.URL); err == nil && conn.URL != "" {
		r.server = redacted(u)
	}
	return r
}

// client returns the client for the current URL.
func (r *redisConn) client() (*redis.Client, error) {
	u, err := connURL(r.conn)
	if err != nil {
		return nil, fmt.Errorf("%s %s %s: %w", r.typ, r.role, r.serverName(), err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil && r.url == u.String() {
		return r.c, nil
	}
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		// ParseURL's messages may quote the URL: name the redacted one.
		return nil, fmt.Errorf("%s %s %s: not a Redis URL", r.typ, r.role, redacted(u))
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
	r.c, r.url, r.server = redis.NewClient(opts), u.String(), redacted(u)
	return r.c, nil
}

func (r *redisConn) serverName() string {
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

// observe runs one observation on the current client, and names the source,
// the server and what failed when it fails: every Redis type's Observe.
func (r *redisConn) observe(ctx context.Context, now time.Time, fn func(context.Context, *redis.Client, time.Time) (Counts, error)) (Counts, error) {
	c, err := r.client()
	if err != nil {
		r.rearm.failed()
		return Counts{}, err
	}
	out, err := fn(ctx, c, now)
	if err != nil {
		r.rearm.failed()
		return Counts{}, r.fail(err)
	}
	r.rearm.ok()
	return out, nil
}

// fail wraps an error of the server's with the source type, the server and
// what failed.
func (r *redisConn) fail(err error) error {
	what := "query failed"
	msg := err.Error()
	var ne net.Error
	var wt *wrongTypeError
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
	return fmt.Errorf("%s %s %s: %s: %w", r.typ, r.role, r.serverName(), what, err)
}

func (r *redisConn) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return nil
	}
	err := r.c.Close()
	r.c = nil
	return err
}

// redisScanCount is the COUNT hint of the SSCAN and HSCAN pages: Redis
// returns about that many entries per call, so one reply stays small.
const redisScanCount = 100

// scanSet reads up to limit members of a set, by SSCAN pages, where
// SMEMBERS would return the whole set in one reply, whatever its size. A
// member may come twice (SSCAN's guarantee is at least once): duplicates
// are dropped.
func scanSet(ctx context.Context, c *redis.Client, key string, limit int) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	var cursor uint64
	for {
		page, next, err := c.SScan(ctx, key, cursor, "", redisScanCount).Result()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		for _, m := range page {
			if !seen[m] && len(out) < limit {
				seen[m] = true
				out = append(out, m)
			}
		}
		if cursor = next; cursor == 0 || len(out) >= limit {
			return out, nil
		}
	}
}
