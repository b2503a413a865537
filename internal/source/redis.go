package source

import (
	"context"
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/conn"
	"github.com/redis/go-redis/v9"
)

// The Redis family: the connection (redisConn, over conn.Redis) and the
// counting (countKeys)
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
				return &conn.WrongTypeError{Key: k.key, Type: typ, Want: "a sorted set, for its score range"}
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
				return &conn.WrongTypeError{Key: k.key, Type: typ, Want: "a list, a sorted set, a set or a hash"}
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

// redisConn is a Redis source's connection (conn.Redis) and what its
// wake-up needs of it.
type redisConn struct {
	*conn.Redis
	typ string
	// rearm tells the wake-up that the server answers again.
	rearm *rearm
}

func newRedisConn(typ string, c config.Conn) *redisConn {
	return &redisConn{Redis: conn.NewRedis(typ, "source", c), typ: typ, rearm: newRearm()}
}

// observe runs one observation on the current client, and names the source,
// the server and what failed when it fails: every Redis type's Observe.
func (r *redisConn) observe(ctx context.Context, now time.Time, fn func(context.Context, *redis.Client, time.Time) (Counts, error)) (Counts, error) {
	c, err := r.Client()
	if err != nil {
		r.rearm.failed()
		return Counts{}, err
	}
	out, err := fn(ctx, c, now)
	if err != nil {
		r.rearm.failed()
		return Counts{}, r.Fail(err)
	}
	r.rearm.ok()
	return out, nil
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
