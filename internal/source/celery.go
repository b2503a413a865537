package source

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/redis/go-redis/v9"
)

// celery reads Celery's queues on its Redis broker (kombu's
// kombu/transport/redis.py): for a queue Q, with global_keyprefix G,
//
//   - G+Q and G+Q+"\x06\x163", G+Q+"\x06\x166", G+Q+"\x06\x169" (lists)
//     hold the messages of priorities 0-2, 3-5, 6-8 and 9 (PRIORITY_STEPS,
//     with the separator "\x06\x16"): all of them are ready;
//   - G+"unacked" (hash) holds every message delivered to a worker and not
//     yet acknowledged, as the JSON [message, exchange, routing_key].
//
// Running is approximate: it counts the unacknowledged messages routed to
// the queues. With task_acks_late a task stays unacknowledged until it
// ends, so that is the tasks running plus those a worker has prefetched
// (and holds for their ETA); without it a task is acknowledged as it
// starts, and only the prefetched ones remain. Celery stores no enqueue
// time, so there is no oldest age; an ETA or countdown task is delivered
// at once and waits in a worker, so it is never in the lists.
type celery struct {
	conn   *redisConn
	prefix string
	queues []string
}

// TypeCelery reads Celery's queues on its Redis broker.
const TypeCelery = "celery"

// CelerySettings are a celery source's keys.
type CelerySettings struct {
	Queues    []string `toml:"queues,omitempty"`
	KeyPrefix string   `toml:"key_prefix,omitempty"` // Celery's global_keyprefix
	config.Conn
}

func init() {
	define(config.SourceType{
		Name: TypeCelery,
		Doc: "Reads Celery's queues on its Redis broker: the messages of every priority are pending; running is " +
			"approximate, the unacknowledged messages routed to the queues. Celery stores no enqueue time, so " +
			"there is no oldest age. The URL is redis://, rediss:// or unix://.",
		Keys: append(slices.Clone(config.ConnKeys), redisQueuesKey("Celery queue names"),
			config.KeyDoc{Name: "key_prefix", Type: "string", Default: `""`,
				Doc: "Celery's `global_keyprefix` transport option, if the application sets one."}),
	}, Watches, func(d *config.SourceDecoder) CelerySettings {
		var s CelerySettings
		d.Conn(&s.Conn, redisSchemes...)
		decodeRedisQueues(d, &s.Queues)
		d.String("key_prefix", &s.KeyPrefix)
		return s
	}, func(s CelerySettings) (Source, error) {
		if len(s.Queues) == 0 {
			return nil, fmt.Errorf("%s source: no queues", TypeCelery)
		}
		return &celery{conn: newRedisConn(TypeCelery, s.Conn), prefix: s.KeyPrefix, queues: s.Queues}, nil
	})
}

// celeryPriorityKeys are the suffixes of a queue's lists (kombu's
// PRIORITY_STEPS [0, 3, 6, 9] and its separator "\x06\x16").
var celeryPriorityKeys = []string{"", "\x06\x163", "\x06\x166", "\x06\x169"}

func (s *celery) Observe(ctx context.Context, now time.Time) (Counts, error) {
	return s.conn.observe(ctx, now, s.observe)
}

// observe ignores now: Celery stores no enqueue or due time.
func (s *celery) observe(ctx context.Context, c *redis.Client, _ time.Time) (Counts, error) {
	var out Counts
	var keys []redisCount
	for _, q := range s.queues {
		for _, suffix := range celeryPriorityKeys {
			keys = append(keys, redisCount{key: s.prefix + q + suffix})
		}
	}
	n, err := countKeys(ctx, c, keys)
	if err != nil {
		return out, err
	}
	for _, v := range n {
		out.Pending += v
	}
	unacked := s.prefix + "unacked"
	if _, err := countKeys(ctx, c, []redisCount{{key: unacked}}); err != nil {
		return out, err // names the key when it is not a hash
	}
	size, err := c.HLen(ctx, unacked).Result()
	if err != nil {
		return out, fmt.Errorf("%s: %w", unacked, err)
	}
	// HSCAN, not HVALS: the hash holds every worker's prefetched messages,
	// whole; one reply must stay within its budget (conn/redis_limit.go) and
	// one call must not block the server. Small pages: a message carries
	// its task's arguments. At most celeryUnackedPage entries are read; of
	// a larger hash, the share of the pool's queues in the entries read
	// stands for the whole hash.
	var running, read int64
	var cursor uint64
	for {
		kv, next, err := c.HScan(ctx, unacked, cursor, "", celeryScanCount).Result()
		if err != nil {
			return out, fmt.Errorf("%s: %w", unacked, err)
		}
		for i := 1; i < len(kv) && read < celeryUnackedPage; i += 2 {
			read++
			if q, ok := celeryRoutingKey(kv[i]); ok && slices.Contains(s.queues, q) {
				running++
			}
		}
		if cursor = next; cursor == 0 || read >= celeryUnackedPage {
			break
		}
	}
	if size > read {
		running = scaleUp(running, read, size)
	}
	out.Running += running
	return out, nil
}

// celeryScanCount is the HSCAN page of the unacked hash: at a few KiB a
// message, a page is far within one reply's budget; celeryUnackedPage
// bounds the entries one observation reads.
const (
	celeryScanCount   = 20
	celeryUnackedPage = 10000
)

// celeryRoutingKey is the routing key of an unacked entry, which for
// Celery's default direct exchanges is the queue's name.
func celeryRoutingKey(entry string) (string, bool) {
	var v []json.RawMessage
	if json.Unmarshal([]byte(entry), &v) != nil || len(v) != 3 {
		return "", false
	}
	var rk string
	if json.Unmarshal(v[2], &rk) != nil {
		return "", false
	}
	return rk, true
}

func (s *celery) Close() error { return s.conn.Close() }

// Watch wakes the pool when a message is pushed onto one of the queues'
// priority lists.
func (s *celery) Watch(ctx context.Context, wake func()) (string, error) {
	var keys []watchKey
	for _, q := range s.queues {
		for _, suffix := range celeryPriorityKeys {
			keys = append(keys, watchKey{key: s.prefix + q + suffix, classes: "l"})
		}
	}
	return s.conn.watcher(staticKeys(keys)).watch(ctx, wake)
}

var _ Watcher = (*celery)(nil)
