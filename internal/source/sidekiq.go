package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/redis/go-redis/v9"
)

// sidekiq reads Sidekiq's queues (sidekiq/sidekiq: lib/sidekiq/api.rb,
// lib/sidekiq/launcher.rb, lib/sidekiq/fetch.rb): for a queue NAME,
//
//   - queue:NAME (list) holds the ready jobs as JSON, pushed on the left
//     and taken from the right, so the last element is the oldest; its
//     enqueued_at is epoch milliseconds (an integer) since Sidekiq 8 and
//     epoch seconds (a float) before (Queue#latency);
//   - processes (set) lists the live processes' identities; a process's
//     hash IDENTITY expires a minute after its last heartbeat, and
//     IDENTITY:work (hash) holds its running jobs as JSON with their
//     "queue" (WorkSet).
//
// Scheduled jobs (schedule) and retries (retry) are not ready. Sidekiq
// itself has no queue pause (Sidekiq Pro's is not read).
type sidekiq struct {
	conn   *redisConn
	queues []string
}

func init() {
	register(config.SourceSidekiq, func(spec config.Source) (Source, error) {
		if len(spec.Queues) == 0 {
			return nil, fmt.Errorf("%s source: no queues", spec.Type)
		}
		return &sidekiq{conn: newRedisConn(spec), queues: spec.Queues}, nil
	})
}

func (s *sidekiq) Observe(ctx context.Context, now time.Time) (Counts, error) {
	return s.conn.observe(ctx, now, s.observe)
}

func (s *sidekiq) observe(ctx context.Context, c *redis.Client, now time.Time) (Counts, error) {
	var out Counts
	var keys []redisCount
	for _, q := range s.queues {
		keys = append(keys, redisCount{key: "queue:" + q})
	}
	n, err := countKeys(ctx, c, keys)
	if err != nil {
		return out, err
	}
	for i, q := range s.queues {
		out.Pending += n[i]
		if n[i] == 0 {
			continue
		}
		job, err := c.LIndex(ctx, "queue:"+q, -1).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("queue %s: the oldest job: %w", q, err)
		}
		if t, ok := sidekiqEnqueuedAt(job); ok {
			if age := max(now.Sub(t), 0); !out.HasOldest || age > out.OldestAge {
				out.OldestAge, out.HasOldest = age, true
			}
		}
	}
	if _, err := countKeys(ctx, c, []redisCount{{key: "processes"}}); err != nil {
		return out, err
	}
	procs, err := c.SMembers(ctx, "processes").Result()
	if err != nil {
		return out, fmt.Errorf("processes: %w", err)
	}
	if len(procs) == 0 {
		return out, nil
	}
	alive := make([]*redis.IntCmd, len(procs))
	work := make([]*redis.MapStringStringCmd, len(procs))
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range procs {
			alive[i] = p.Exists(ctx, id)
			work[i] = p.HGetAll(ctx, id+":work")
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("the processes' work: %w", err)
	}
	for i := range procs {
		if alive[i].Val() == 0 {
			continue // dead: its heartbeat expired, Sidekiq prunes it
		}
		for _, w := range work[i].Val() {
			var entry struct {
				Queue string `json:"queue"`
			}
			if json.Unmarshal([]byte(w), &entry) == nil && slices.Contains(s.queues, entry.Queue) {
				out.Running++
			}
		}
	}
	return out, nil
}

// sidekiqEnqueuedAt reads a job's enqueued_at: epoch milliseconds since
// Sidekiq 8, epoch seconds (a float) before. A value above 1e11 cannot be
// seconds (that is the year 5138).
func sidekiqEnqueuedAt(job string) (time.Time, bool) {
	var j struct {
		EnqueuedAt *float64 `json:"enqueued_at"`
	}
	if json.Unmarshal([]byte(job), &j) != nil || j.EnqueuedAt == nil {
		return time.Time{}, false
	}
	v := *j.EnqueuedAt
	if v > 1e11 {
		return time.UnixMilli(int64(v)), true
	}
	return time.UnixMicro(int64(v * 1e6)), true
}

func (s *sidekiq) Close() error { return s.conn.close() }
