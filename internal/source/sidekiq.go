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

// TypeSidekiq reads Sidekiq's queues.
const TypeSidekiq = "sidekiq"

// SidekiqSettings are a sidekiq source's keys.
type SidekiqSettings struct {
	Queues []string `toml:"queues,omitempty"`
	config.Conn
}

func init() {
	define(config.SourceType{
		Name: TypeSidekiq,
		Doc: "Reads Sidekiq's queues: ready jobs are pending, the jobs the live processes hold running. Scheduled " +
			"jobs and retries are not ready. The URL is redis://, rediss:// or unix://.",
		Keys: append(slices.Clone(config.ConnKeys), redisQueuesKey("Sidekiq queue names")),
	}, Watches, func(d *config.SourceDecoder) SidekiqSettings {
		var s SidekiqSettings
		d.Conn(&s.Conn, redisSchemes...)
		decodeRedisQueues(d, &s.Queues)
		return s
	}, func(s SidekiqSettings) (Source, error) {
		if len(s.Queues) == 0 {
			return nil, fmt.Errorf("%s source: no queues", TypeSidekiq)
		}
		return &sidekiq{conn: newRedisConn(TypeSidekiq, s.Conn), queues: s.Queues}, nil
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
	nprocs, err := countKeys(ctx, c, []redisCount{{key: "processes"}})
	if err != nil {
		return out, err
	}
	procs, err := scanSet(ctx, c, "processes", sidekiqProcessPage)
	if err != nil {
		return out, fmt.Errorf("processes: %w", err)
	}
	if len(procs) == 0 {
		return out, nil
	}
	alive := make([]*redis.IntCmd, len(procs))
	size := make([]*redis.IntCmd, len(procs))
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range procs {
			alive[i] = p.Exists(ctx, id)
			size[i] = p.HLen(ctx, id+":work")
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("the processes' work: %w", err)
	}
	var running int64
	for i, id := range procs {
		if alive[i].Val() == 0 || size[i].Val() == 0 {
			continue // dead (its heartbeat expired, Sidekiq prunes it), or idle
		}
		n, err := s.running(ctx, c, id+":work", size[i].Val())
		if err != nil {
			return out, fmt.Errorf("the processes' work: %w", err)
		}
		running += n
	}
	if read := int64(len(procs)); nprocs[0] > read {
		running = scaleUp(running, read, nprocs[0])
	}
	out.Running += running
	return out, nil
}

// Bounds of what one observation reads of Sidekiq's process registry: the
// processes (a larger registry is read in part, and the running count of
// the processes read stands for all of them, in proportion), and the work
// entries of one process (as many as its concurrency; a hash larger than
// the bound is read in part, its share of the pool's queues standing for
// the whole hash).
const (
	sidekiqProcessPage = 1024
	sidekiqWorkPage    = 1024
)

// running counts the entries of a process's work hash (size entries) that
// run one of the pool's queues, reading it by HSCAN pages, up to
// sidekiqWorkPage entries.
func (s *sidekiq) running(ctx context.Context, c *redis.Client, key string, size int64) (int64, error) {
	var n, read int64
	var cursor uint64
	for {
		kv, next, err := c.HScan(ctx, key, cursor, "", redisScanCount).Result()
		if err != nil {
			return 0, err
		}
		for i := 1; i < len(kv) && read < sidekiqWorkPage; i += 2 {
			read++
			var entry struct {
				Queue string `json:"queue"`
			}
			if json.Unmarshal([]byte(kv[i]), &entry) == nil && slices.Contains(s.queues, entry.Queue) {
				n++
			}
		}
		if cursor = next; cursor == 0 || read >= sidekiqWorkPage {
			break
		}
	}
	if size > read {
		n = scaleUp(n, read, size)
	}
	return n, nil
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

func (s *sidekiq) Close() error { return s.conn.Close() }

// Watch wakes the pool when a job is pushed onto one of the queues.
func (s *sidekiq) Watch(ctx context.Context, wake func()) (string, error) {
	keys := make([]watchKey, len(s.queues))
	for i, q := range s.queues {
		keys[i] = watchKey{key: "queue:" + q, classes: "l"}
	}
	return s.conn.watcher(staticKeys(keys)).watch(ctx, wake)
}

var _ Watcher = (*sidekiq)(nil)
