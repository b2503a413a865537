package source

import (
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/redis/go-redis/v9"
)

// RedisClient is the Redis sources' connection (redisConn) for another
// package: the fleet's coordination store (internal/fleet/redisstore,
// issue 20), which connects to the Redis the queue already lives in with
// the same credential keys, TLS (rediss://), Unix sockets, short timeouts,
// reply limit and error wording as the sources, rather than a second
// connection builder.
type RedisClient struct{ r *redisConn }

// NewRedisClient returns a connection to conn's server; what names it in
// messages ("fleet" gives "fleet store redis://…: unreachable: …"). It
// dials nothing until Client is called.
func NewRedisClient(what string, conn config.Conn) *RedisClient {
	r := newRedisConn(what, conn)
	r.role = "store"
	return &RedisClient{r: r}
}

// Client returns the client for the current URL and credentials, read
// again at each call: a rotated password or URL file gives a new client
// (the old one is closed), so a caller that adds hooks must add them again
// when the pointer changes.
func (c *RedisClient) Client() (*redis.Client, error) { return c.r.client() }

// Fail wraps an error of the server's with what failed (unreachable, timed
// out, authentication failed, ...) and the redacted server, as the
// sources' messages do.
func (c *RedisClient) Fail(err error) error { return c.r.fail(err) }

// Server is the redacted server, for messages.
func (c *RedisClient) Server() string { return c.r.serverName() }

// Close closes the current client.
func (c *RedisClient) Close() error { return c.r.close() }
