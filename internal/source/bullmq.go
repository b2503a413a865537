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

// bullmq reads BullMQ's queues (taskforcesh/bullmq, src/commands/*.lua and
// src/classes/queue-keys.ts): for a queue Q under prefix P,
//
//   - P:Q:wait (list) holds the ready jobs, pushed on the left and taken
//     from the right, so its last element is the oldest;
//   - P:Q:prioritized (sorted set) the ready jobs with a priority;
//   - P:Q:paused (list) the ready jobs of a paused queue (BullMQ 5; BullMQ 6
//     leaves them in wait), and P:Q:meta's field "paused" marks the queue
//     paused in both (isQueuePaused.lua: HEXISTS meta paused);
//   - P:Q:active (list) the jobs a worker holds;
//   - P:Q:delayed (sorted set) the delayed jobs, scored
//     timestamp_ms * 0x1000 + a 12-bit counter: the due ones are ready,
//     since a worker promotes them only when it asks for a job;
//   - P:Q:ID (hash) the job, whose "timestamp" is its creation in ms.
type bullmq struct {
	conn   *redisConn
	prefix string
	queues []string
}

// TypeBullMQ reads BullMQ's queues.
const TypeBullMQ = "bullmq"

// DefaultBullMQPrefix is BullMQ's own default for its prefix option.
const DefaultBullMQPrefix = "bull"

// BullMQSettings are a bullmq source's keys.
type BullMQSettings struct {
	Queues    []string `toml:"queues,omitempty"`
	KeyPrefix string   `toml:"key_prefix,omitempty"` // BullMQ's prefix option
	config.Conn
}

func init() {
	define(config.SourceType{
		Name: TypeBullMQ,
		Doc: "Reads BullMQ's queues on Redis: ready jobs (wait, paused, prioritized, and the delayed ones that are " +
			"due) are pending, active ones running; a paused queue's ready jobs are paused. The URL is redis://, " +
			"rediss:// or unix://.",
		Keys: append(slices.Clone(config.ConnKeys), redisQueuesKey("BullMQ queue names"),
			config.KeyDoc{Name: "key_prefix", Type: "string", Default: `"bull"`, Limits: "not empty",
				Doc: "BullMQ's `prefix` option, if the application sets one."}),
	}, Watches, func(d *config.SourceDecoder) BullMQSettings {
		s := BullMQSettings{KeyPrefix: DefaultBullMQPrefix}
		d.Conn(&s.Conn, redisSchemes...)
		decodeRedisQueues(d, &s.Queues)
		if d.String("key_prefix", &s.KeyPrefix) && s.KeyPrefix == "" {
			d.Errorf("key_prefix", "must not be empty (BullMQ's default is %q)", DefaultBullMQPrefix)
		}
		return s
	}, func(s BullMQSettings) (Source, error) {
		if len(s.Queues) == 0 {
			return nil, fmt.Errorf("%s source: no queues", TypeBullMQ)
		}
		prefix := s.KeyPrefix
		if prefix == "" {
			prefix = DefaultBullMQPrefix
		}
		return &bullmq{conn: newRedisConn(TypeBullMQ, s.Conn), prefix: prefix, queues: s.Queues}, nil
	})
}

// bullmqDelayShift is the factor of the delayed set's score: the counter
// takes the low 12 bits.
const bullmqDelayShift = 0x1000

// bullmqDueMax is the highest delayed score that is due at now: any
// counter value of the current millisecond or before.
func bullmqDueMax(now time.Time) string {
	return strconv.FormatInt(now.UnixMilli()*bullmqDelayShift+bullmqDelayShift-1, 10)
}

func (s *bullmq) Observe(ctx context.Context, now time.Time) (Counts, error) {
	return s.conn.observe(ctx, now, s.observe)
}

func (s *bullmq) observe(ctx context.Context, c *redis.Client, now time.Time) (Counts, error) {
	var out Counts
	dueMax := bullmqDueMax(now)
	for _, q := range s.queues {
		k := func(name string) string { return s.prefix + ":" + q + ":" + name }
		paused, err := c.HExists(ctx, k("meta"), "paused").Result()
		if err != nil {
			return out, fmt.Errorf("queue %s: %w", q, err)
		}
		n, err := countKeys(ctx, c, []redisCount{
			{key: k("wait")}, {key: k("paused")}, {key: k("prioritized")},
			{key: k("delayed"), zrange: &[2]string{"-inf", dueMax}},
			{key: k("active")},
		})
		if err != nil {
			return out, fmt.Errorf("queue %s: %w", q, err)
		}
		ready := n[0] + n[1] + n[2] + n[3]
		out.Running += n[4]
		if paused {
			out.Paused += ready
			continue
		}
		out.Pending += ready
		if ready == 0 {
			continue
		}
		age, ok, err := s.oldest(ctx, c, k, n, now, dueMax)
		if err != nil {
			return out, fmt.Errorf("queue %s: the oldest job: %w", q, err)
		}
		if ok && (!out.HasOldest || age > out.OldestAge) {
			out.OldestAge, out.HasOldest = age, true
		}
	}
	return out, nil
}

// oldest is the age of the queue's oldest ready job: the longest-waiting of
// the tail of wait (and of paused, when BullMQ 5 left jobs there), the
// first prioritized job, and the earliest due delayed job, which became
// ready when its delay ran out.
func (s *bullmq) oldest(ctx context.Context, c *redis.Client, k func(string) string, n []int64, now time.Time, dueMax string) (time.Duration, bool, error) {
	var ids []string
	for i, list := range []string{"wait", "paused"} {
		if n[i] > 0 {
			id, err := c.LIndex(ctx, k(list), -1).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return 0, false, err
			}
			ids = append(ids, id)
		}
	}
	if n[2] > 0 {
		first, err := c.ZRange(ctx, k("prioritized"), 0, 0).Result()
		if err != nil {
			return 0, false, err
		}
		ids = append(ids, first...)
	}
	var age time.Duration
	found := false
	for _, id := range ids {
		if id == "" {
			continue
		}
		ts, err := c.HGet(ctx, k(id), "timestamp").Result()
		if errors.Is(err, redis.Nil) {
			continue // taken, or removed, since
		}
		if err != nil {
			return 0, false, err
		}
		ms, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			continue
		}
		if a := now.Sub(time.UnixMilli(ms)); !found || a > age {
			age, found = a, true
		}
	}
	if n[3] > 0 {
		first, err := c.ZRangeByScoreWithScores(ctx, k("delayed"), &redis.ZRangeBy{Min: "-inf", Max: dueMax, Count: 1}).Result()
		if err != nil {
			return 0, false, err
		}
		if len(first) == 1 {
			due := time.UnixMilli(int64(first[0].Score) / bullmqDelayShift)
			if a := now.Sub(due); !found || a > age {
				age, found = a, true
			}
		}
	}
	return max(age, 0), found, nil
}

func (s *bullmq) Close() error { return s.conn.Close() }

// Watch wakes the pool when a job is added, prioritized, delayed, paused
// or taken: BullMQ's addStandardJob, addPrioritizedJob and addDelayedJob
// push onto wait (or paused) and add to the marker, prioritized or delayed
// sets (src/commands/includes/addJobInTargetList.lua); a worker moves jobs
// into active. A due delayed job needs no event: it is counted as it falls
// due, at the next poll.
func (s *bullmq) Watch(ctx context.Context, wake func()) (string, error) {
	var keys []watchKey
	for _, q := range s.queues {
		for _, k := range []watchKey{{"wait", "l"}, {"paused", "l"}, {"active", "l"}, {"prioritized", "z"}, {"delayed", "z"}} {
			keys = append(keys, watchKey{key: s.prefix + ":" + q + ":" + k.key, classes: k.classes})
		}
	}
	return s.conn.watcher(staticKeys(keys)).watch(ctx, wake)
}

var _ Watcher = (*bullmq)(nil)
