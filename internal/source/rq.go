package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/redis/go-redis/v9"
)

// rq reads RQ's queues (rq/rq: rq/queue.py, rq/registry.py, rq/suspension.py):
// for a queue NAME,
//
//   - rq:queue:NAME (list) holds the ids of the ready jobs, pushed on the
//     right and popped from the left, so its first element is the oldest;
//   - rq:wip:NAME (sorted set, the StartedJobRegistry) the started jobs,
//     scored by when their claim expires (Unix seconds): the ones not
//     expired are running, an expired one belongs to a dead worker;
//   - rq:job:ID (hash) the job, whose enqueued_at is an ISO 8601 UTC time;
//   - rq:suspended, when set, suspends every worker (rq suspend): the ready
//     jobs are then paused.
//
// Scheduled and deferred jobs live in other registries and are not ready.
type rq struct {
	conn   *redisConn
	queues []string
}

// TypeRQ reads RQ's queues.
const TypeRQ = "rq"

// RQSettings are a rq source's keys.
type RQSettings struct {
	Queues []string `toml:"queues,omitempty"`
	config.Conn
}

func init() {
	define(config.SourceType{
		Name: TypeRQ,
		Doc: "Reads RQ's queues: ready jobs are pending, started jobs whose claim has not expired running; while " +
			"`rq suspend` holds, the ready jobs are paused. The URL is redis://, rediss:// or unix://.",
		Keys: append(slices.Clone(config.ConnKeys), redisQueuesKey("RQ queue names")),
	}, Watches, func(d *config.SourceDecoder) RQSettings {
		var s RQSettings
		d.Conn(&s.Conn, redisSchemes...)
		decodeRedisQueues(d, &s.Queues)
		return s
	}, func(s RQSettings) (Source, error) {
		if len(s.Queues) == 0 {
			return nil, fmt.Errorf("%s source: no queues", TypeRQ)
		}
		return &rq{conn: newRedisConn(TypeRQ, s.Conn), queues: s.Queues}, nil
	})
}

func (s *rq) Observe(ctx context.Context, now time.Time) (Counts, error) {
	return s.conn.observe(ctx, now, s.observe)
}

func (s *rq) observe(ctx context.Context, c *redis.Client, now time.Time) (Counts, error) {
	var out Counts
	suspended, err := c.Exists(ctx, "rq:suspended").Result()
	if err != nil {
		return out, err
	}
	// Exclusive: a claim that expires at now has lapsed.
	notExpired := "(" + strconv.FormatFloat(float64(now.UnixMicro())/1e6, 'f', -1, 64)
	var keys []redisCount
	for _, q := range s.queues {
		keys = append(keys, redisCount{key: "rq:queue:" + q}, redisCount{key: "rq:wip:" + q, zrange: &[2]string{notExpired, "+inf"}})
	}
	n, err := countKeys(ctx, c, keys)
	if err != nil {
		return out, err
	}
	for i, q := range s.queues {
		ready := n[2*i]
		out.Running += n[2*i+1]
		if suspended > 0 {
			out.Paused += ready
			continue
		}
		out.Pending += ready
		if ready == 0 {
			continue
		}
		age, ok, err := rqOldest(ctx, c, q, now)
		if err != nil {
			return out, fmt.Errorf("queue %s: the oldest job: %w", q, err)
		}
		if ok && (!out.HasOldest || age > out.OldestAge) {
			out.OldestAge, out.HasOldest = age, true
		}
	}
	return out, nil
}

func rqOldest(ctx context.Context, c *redis.Client, q string, now time.Time) (time.Duration, bool, error) {
	id, err := c.LIndex(ctx, "rq:queue:"+q, 0).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	at, err := c.HGet(ctx, "rq:job:"+id, "enqueued_at").Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	t, ok := parseRQTime(at)
	if !ok {
		return 0, false, nil
	}
	return max(now.Sub(t), 0), true, nil
}

// parseRQTime parses rq.utils.utcformat's "%Y-%m-%dT%H:%M:%S.%fZ" (and
// the forms without fraction or with an offset).
func parseRQTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999", "2006-01-02T15:04:05Z"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

func (s *rq) Close() error { return s.conn.Close() }

// Watch wakes the pool when a job is pushed onto one of the queues.
func (s *rq) Watch(ctx context.Context, wake func()) (string, error) {
	keys := make([]watchKey, len(s.queues))
	for i, q := range s.queues {
		keys[i] = watchKey{key: "rq:queue:" + q, classes: "l"}
	}
	return s.conn.watcher(staticKeys(keys)).watch(ctx, wake)
}

var _ Watcher = (*rq)(nil)
