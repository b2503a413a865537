package source

import (
	"context"
	"errors"
	"fmt"
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

func init() {
	register(config.SourceBullMQ, func(spec config.Source) (Source, error) {
		if len(spec.Queues) == 0 {
			return nil, fmt.Errorf("%s source: no queues", spec.Type)
		}
		prefix := spec.KeyPrefix
		if prefix == "" {
			prefix = config.DefaultBullMQPrefix
		}
		return &bullmq{conn: newRedisConn(spec), prefix: prefix, queues: spec.Queues}, nil
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

func (s *bullmq) Close() error { return s.conn.close() }
