package source

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/conn"
)

// TypeFlexiqRedis reads flexiq's Redis storage.
const TypeFlexiqRedis = "flexiq-redis"

// DefaultFlexiqKeyPrefix is flexiq's own: RedisStorage::new uses the key
// prefix "flexiq:" (storage/redis_backend/mod.rs).
const DefaultFlexiqKeyPrefix = "flexiq:"

// FlexiqRedisSettings are a flexiq-redis source's keys.
type FlexiqRedisSettings struct {
	Queues    []string `toml:"queues,omitempty"`
	Namespace string   `toml:"namespace,omitempty"` // a filter; "" = none
	KeyPrefix string   `toml:"key_prefix,omitempty"`
	config.Conn
}

func init() {
	define(config.SourceType{
		Name: TypeFlexiqRedis,
		Doc: "Reads flexiq's Redis storage, as flexiq's Rust core lays it out under its key prefix. flexiq keeps " +
			"no list of its queues in Redis, so the queues are configured. The URL is redis:// or rediss://.",
		Keys: append(slices.Clone(config.ConnKeys),
			config.KeyDoc{Name: "queues", Type: "array of strings", Required: true, Limits: "at least one; no empty names",
				Doc: "The queues to read, summed: flexiq keeps no list of its queues in Redis."},
			namespaceKey,
			config.KeyDoc{Name: "key_prefix", Type: "string", Default: `"flexiq:"`,
				Doc: "The key prefix flexiq's Redis storage was given, if not its default."}),
	}, Watches|ReportsThreads, decodeFlexiqRedis, func(s FlexiqRedisSettings) (Source, error) { return newFlexiqRedis(s) })
}

func decodeFlexiqRedis(d *config.SourceDecoder) FlexiqRedisSettings {
	var s FlexiqRedisSettings
	d.Queues(&s.Queues)
	d.String("namespace", &s.Namespace)
	d.Conn(&s.Conn, "redis", "rediss")
	s.KeyPrefix = DefaultFlexiqKeyPrefix
	d.String("key_prefix", &s.KeyPrefix)
	// flexiq keeps no set of its queue names in Redis: each queue is its
	// own sorted set, found only by name.
	if len(s.Queues) == 0 && !d.Has("queues") {
		d.Errorf("queues", "required for %s sources: flexiq keeps no list of its queues in Redis", TypeFlexiqRedis)
	}
	return s
}

// flexiqRedis reads flexiq's Redis storage, as flexiq's Rust core lays it
// out under its key prefix ("flexiq:" unless configured; crates/flexiq-core/
// src/storage/redis_backend/):
//   - queue:<q>:pending, a sorted set of the queue's pending job ids, scored
//     dequeue_score(priority, scheduled_at) (jobs/mod.rs), future jobs
//     included (jobs/enqueue.rs, jobs/dequeue.rs);
//   - jobs:status:1, the running job ids, and jobs:by_queue:<q>, the queue's
//     live job ids (jobs/enqueue.rs; the claim moves an id from
//     jobs:status:0 to jobs:status:1, jobs/dequeue.rs);
//   - queues:paused, the default namespace's paused queue names, and
//     queues:paused:<segment> a namespace's (queue_state.rs);
//   - workers:all, the worker ids, and worker:<id>, a hash with
//     last_heartbeat (Unix ms), queues, threads and namespace (workers.rs).
//
// flexiq keeps no set of its queue names, so the queues are configured.
type flexiqRedis struct {
	spec   FlexiqRedisSettings
	prefix string
	conn   *redisConn
}

func newFlexiqRedis(spec FlexiqRedisSettings) (*flexiqRedis, error) {
	if len(spec.Queues) == 0 {
		return nil, fmt.Errorf("%s source: queues is empty: flexiq keeps no list of its queues in Redis", TypeFlexiqRedis)
	}
	prefix := spec.KeyPrefix
	if prefix == "" {
		prefix = DefaultFlexiqKeyPrefix
	}
	return &flexiqRedis{spec: spec, prefix: prefix, conn: newRedisConn(TypeFlexiqRedis, spec.Conn)}, nil
}

// Priority bands of the pending score, as dequeue_score clamps priority.
const (
	minPriority = 0
	maxPriority = 999
	bandWidth   = 10_000_000_000_000 // 1e13 ms, about 317 years
)

// scoreRange is one ZCOUNT range, both ends inclusive.
type scoreRange struct{ min, max float64 }

// dequeueScore is flexiq's dequeue_score (redis_backend/jobs/mod.rs): the
// priority clamped to 0..999, (1000 - p) * 1e13 + scheduled_at computed in
// 64-bit integers and then rounded to a float64, as Redis stores scores.
func dequeueScore(priority int, scheduledAtMs int64) float64 {
	p := int64(min(max(priority, minPriority), maxPriority))
	return float64((1000-p)*bandWidth + scheduledAtMs)
}

// dueRanges are the score ranges of the jobs due at nowMs, one per
// priority band: band p holds the scores from (1000 - p) * 1e13 up, and a
// job of the band is due when its scheduled_at <= now, that is, when its
// score <= dequeueScore(p, now). Each bound is computed as flexiq computes a
// score, so the comparison is between the same roundings: near 1e16 (the
// bands of priorities 0 to 99, past 2^53) a float64 holds only every other
// millisecond (rounding ties to even), and a job scheduled 1 or 2 ms after
// now may round onto now's score. It then counts as due at most 2 ms early:
// a job counts exactly when its score is at most now's, so a due job always
// counts, once, which is what the table test pins down. The ranges are disjoint and
// ascending while now < 1e13 ms (the year 2286).
func dueRanges(nowMs int64) []scoreRange {
	ranges := make([]scoreRange, 0, maxPriority-minPriority+1)
	for p := maxPriority; p >= minPriority; p-- {
		ranges = append(ranges, scoreRange{
			min: float64((1000 - int64(p)) * bandWidth),
			max: dequeueScore(p, nowMs),
		})
	}
	return ranges
}

// scheduledAt recovers a pending score's scheduled_at, to the float64's
// precision (2 ms near 1e16).
func scheduledAt(score float64) int64 {
	band := math.Floor(score / bandWidth)
	return int64(score - band*bandWidth)
}

func fmtScore(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func (s *flexiqRedis) key(parts ...string) string { return s.prefix + strings.Join(parts, ":") }

// namespaceSegment is flexiq's namespace_segment (jobs/helpers.rs): "-" for
// the default namespace, "<len>:<ns>" otherwise.
func namespaceSegment(ns string) string {
	if ns == "" {
		return "-"
	}
	return fmt.Sprintf("%d:%s", len(ns), ns)
}

// pausedKey is the paused-queue set the pool's pauses are in: the
// namespace's, or the default namespace's (queue_state.rs).
func (s *flexiqRedis) pausedKey() string {
	if s.spec.Namespace == "" {
		return s.key("queues", "paused")
	}
	return s.key("queues", "paused", namespaceSegment(s.spec.Namespace))
}

func (s *flexiqRedis) fail(what string, err error) error {
	msg := err.Error()
	var big *conn.ReplyTooLargeError
	switch {
	case errors.As(err, &big):
		msg = "reply too large: " + msg
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"),
		strings.Contains(msg, "AUTH") && strings.Contains(msg, "without any password"):
		msg = "authentication failed: " + msg
	case strings.Contains(msg, "WRONGTYPE"):
		msg = "a key is not of the type flexiq writes (wrong key_prefix, or another program's key): " + msg
	case errors.Is(err, context.DeadlineExceeded):
		msg = "timed out: " + msg
	}
	return fmt.Errorf("%s source %s: %s: %s", TypeFlexiqRedis, s.conn.Server(), what, msg)
}

// Observe reads every count in one MULTI/EXEC, so they are of one moment:
// per queue, one ZCOUNT and one ZRANGE (the band's oldest due job) per
// priority band, SINTERCARD of the running set and the queue's jobs, and
// the paused set. That is about 2,000 cheap commands per queue, in one
// round trip. With a namespace, observeNamespace reads instead.
func (s *flexiqRedis) Observe(ctx context.Context, now time.Time) (Counts, error) {
	client, err := s.conn.Client()
	if err == nil {
		var c Counts
		if c, err = s.observe(ctx, client, now); err == nil {
			s.conn.rearm.ok()
			return c, nil
		}
	}
	s.conn.rearm.failed()
	return Counts{}, err
}

func (s *flexiqRedis) observe(ctx context.Context, client *redis.Client, now time.Time) (Counts, error) {
	if s.spec.Namespace != "" {
		return s.observeNamespace(ctx, client, now)
	}
	nowMs := now.UnixMilli()
	ranges := dueRanges(nowMs)
	type queueCmds struct {
		counts  []*redis.IntCmd
		oldest  []*redis.ZSliceCmd
		running *redis.IntCmd
	}
	cmds := make([]queueCmds, len(s.spec.Queues))
	var paused *redis.BoolSliceCmd
	_, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		running := s.key("jobs", "status", "1")
		for i, q := range s.spec.Queues {
			pending := s.key("queue", q, "pending")
			for _, r := range ranges {
				lo, hi := fmtScore(r.min), fmtScore(r.max)
				cmds[i].counts = append(cmds[i].counts, p.ZCount(ctx, pending, lo, hi))
				cmds[i].oldest = append(cmds[i].oldest, p.ZRangeByScoreWithScores(ctx, pending,
					&redis.ZRangeBy{Min: lo, Max: hi, Count: 1}))
			}
			cmds[i].running = p.SInterCard(ctx, 0, running, s.key("jobs", "by_queue", q))
		}
		paused = s.pausedOf(ctx, p)
		return nil
	})
	if err != nil {
		return Counts{}, s.fail("reading queues "+strings.Join(s.spec.Queues, ", "), err)
	}
	isPaused := s.pausedSet(paused)
	var c Counts
	oldest := int64(math.MaxInt64)
	for i, q := range s.spec.Queues {
		var due int64
		for b, cmd := range cmds[i].counts {
			n := cmd.Val()
			due += n
			if z := cmds[i].oldest[b].Val(); n > 0 && len(z) > 0 && !isPaused[q] {
				oldest = min(oldest, scheduledAt(z[0].Score))
			}
		}
		if isPaused[q] {
			c.Paused += due
		} else {
			c.Pending += due
		}
		c.Running += cmds[i].running.Val()
	}
	c.setOldest(nowMs, oldest)
	return c, nil
}

// pausedOf asks which of the pool's queues are paused: SMISMEMBER, whose
// reply is as long as the pool's queue list, where SMEMBERS would return
// every paused queue of the server.
func (s *flexiqRedis) pausedOf(ctx context.Context, p redis.Pipeliner) *redis.BoolSliceCmd {
	return p.SMIsMember(ctx, s.pausedKey(), toAny(s.spec.Queues)...)
}

func (s *flexiqRedis) pausedSet(cmd *redis.BoolSliceCmd) map[string]bool {
	m := make(map[string]bool, len(s.spec.Queues))
	for i, in := range cmd.Val() {
		if in && i < len(s.spec.Queues) {
			m[s.spec.Queues[i]] = true
		}
	}
	return m
}

func (c *Counts) setOldest(nowMs, oldest int64) {
	if c.Pending > 0 && oldest != math.MaxInt64 {
		c.OldestAge = max(time.Duration(nowMs-oldest)*time.Millisecond, 0)
		c.HasOldest = true
	}
}

// flexiqNamespacePage bounds the due ids observeNamespace reads per queue:
// about 300 KB of ids and scores, well within one reply's budget.
const flexiqNamespacePage = 4096

// observeNamespace reads a namespace's counts. flexiq's pending sets hold
// every namespace's jobs, and only the set jobs:by_ns:<segment>
// (helpers.rs) says whose a job is. So it counts each band's due jobs
// (ZCOUNT, in one MULTI with the running count, which SINTERCARD takes over
// the namespace's set too, and the paused queues), reads the due ids of a
// bounded page, the next flexiqNamespacePage jobs in dequeue order
// (ZRANGEBYSCORE ... LIMIT), and checks them against the namespace's set
// (SMISMEMBER). When a queue has more due jobs than the page, the
// namespace's share of the page stands for its share of the rest: its
// count is then an estimate, exact when the namespaces' jobs are mixed
// evenly, and the oldest age is that of the oldest job of the page. Reading
// every due id instead would cost what the queue weighs, without bound.
func (s *flexiqRedis) observeNamespace(ctx context.Context, client *redis.Client, now time.Time) (Counts, error) {
	nowMs := now.UnixMilli()
	ranges := dueRanges(nowMs)
	byNS := s.key("jobs", "by_ns", namespaceSegment(s.spec.Namespace))
	dueCounts := make([][]*redis.IntCmd, len(s.spec.Queues))
	running := make([]*redis.IntCmd, len(s.spec.Queues))
	var paused *redis.BoolSliceCmd
	_, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range s.spec.Queues {
			pending := s.key("queue", q, "pending")
			for _, r := range ranges {
				dueCounts[i] = append(dueCounts[i], p.ZCount(ctx, pending, fmtScore(r.min), fmtScore(r.max)))
			}
			running[i] = p.SInterCard(ctx, 0, s.key("jobs", "status", "1"), s.key("jobs", "by_queue", q), byNS)
		}
		paused = s.pausedOf(ctx, p)
		return nil
	})
	if err != nil {
		return Counts{}, s.fail("reading queues "+strings.Join(s.spec.Queues, ", "), err)
	}
	isPaused := s.pausedSet(paused)
	var c Counts
	oldest := int64(math.MaxInt64)
	for i, q := range s.spec.Queues {
		c.Running += running[i].Val()
		ids, scores, total, err := s.namespacePage(ctx, client, q, dueCounts[i], ranges)
		if err != nil {
			return Counts{}, err
		}
		if len(ids) == 0 {
			continue
		}
		mine, err := client.SMIsMember(ctx, byNS, toAny(ids)...).Result()
		if err != nil {
			return Counts{}, s.fail("reading namespace "+s.spec.Namespace, err)
		}
		var n int64
		for j, in := range mine {
			if in {
				n++
				if !isPaused[q] {
					oldest = min(oldest, scheduledAt(scores[j]))
				}
			}
		}
		if read := int64(len(ids)); total > read {
			n = scaleUp(n, read, total)
		}
		if isPaused[q] {
			c.Paused += n
		} else {
			c.Pending += n
		}
	}
	c.setOldest(nowMs, oldest)
	return c, nil
}

// namespacePage reads the first flexiqNamespacePage due jobs of queue q:
// the bands in dequeue order, each read up to what is left of the page.
// total is how many are due in all, which the page's share scales up to.
func (s *flexiqRedis) namespacePage(ctx context.Context, client *redis.Client, q string, due []*redis.IntCmd, ranges []scoreRange) (ids []string, scores []float64, total int64, err error) {
	var page []*redis.ZSliceCmd
	left := int64(flexiqNamespacePage)
	_, err = client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b, cmd := range due {
			n := cmd.Val()
			total += n
			if n == 0 || left == 0 {
				continue
			}
			take := min(n, left)
			left -= take
			page = append(page, p.ZRangeByScoreWithScores(ctx, s.key("queue", q, "pending"),
				&redis.ZRangeBy{Min: fmtScore(ranges[b].min), Max: fmtScore(ranges[b].max), Count: take}))
		}
		return nil
	})
	if err != nil {
		return nil, nil, 0, s.fail("reading queue "+q, err)
	}
	for _, cmd := range page {
		for _, z := range cmd.Val() {
			id, _ := z.Member.(string)
			ids, scores = append(ids, id), append(scores, z.Score)
		}
	}
	return ids, scores, total, nil
}

// scaleUp is n of read, as a share of total, rounded up: a namespace seen
// in a page is never estimated at zero in the whole.
func scaleUp(n, read, total int64) int64 {
	if read <= 0 || n == 0 {
		return n
	}
	return int64(math.Ceil(float64(n) * float64(total) / float64(read)))
}

func toAny(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// flexiqWorkersPage bounds the workers Threads reads. A registry larger than
// this (dead workers that were never removed, or a huge fleet) is read in
// part: the threads are then picked from the workers read, and if none of
// them serves the pool, the pool keeps its fallback (ok false), as when no
// worker says.
const flexiqWorkersPage = 2048

// Threads reads the worker registry (workers.rs): the ids in workers:all
// (SSCAN, up to flexiqWorkersPage), then each worker's hash in one
// pipeline. A hash without a namespace field was registered before
// flexiq's #836: the default namespace's.
func (s *flexiqRedis) Threads(ctx context.Context, now time.Time) (int, bool, error) {
	client, err := s.conn.Client()
	if err != nil {
		return 0, false, err
	}
	ids, err := scanSet(ctx, client, s.key("workers", "all"), flexiqWorkersPage)
	if err != nil {
		return 0, false, s.fail("reading workers", err)
	}
	cmds := make([]*redis.SliceCmd, len(ids))
	if len(ids) > 0 {
		_, err = client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.HMGet(ctx, s.key("worker", id), "last_heartbeat", "queues", "threads", "namespace")
			}
			return nil
		})
		if err != nil {
			return 0, false, s.fail("reading workers", err)
		}
	}
	workers := make([]liveWorker, 0, len(ids))
	for _, cmd := range cmds {
		v := cmd.Val()
		str := func(i int) string { s, _ := v[i].(string); return s }
		hb, _ := strconv.ParseInt(str(0), 10, 64)
		threads, _ := strconv.Atoi(str(2))
		w := liveWorker{heartbeatMs: hb, queues: str(1), threads: threads}
		if seg := str(3); seg != "" && seg != "-" {
			if _, ns, ok := strings.Cut(seg, ":"); ok {
				w.namespace, w.hasNS = ns, true
			}
		}
		workers = append(workers, w)
	}
	n, ok := pickThreads(workers, s.spec.Queues, s.spec.Namespace, now)
	return n, ok, nil
}

func (s *flexiqRedis) Close() error { return s.conn.Close() }

// Watch wakes the pool when a job enters one of the queues' pending sets
// (enqueue, retry, release), or when a job starts or ends (the running
// set, jobs:status:1, which every queue's claims and completions write).
func (s *flexiqRedis) Watch(ctx context.Context, wake func()) (string, error) {
	keys := []watchKey{{key: s.key("jobs", "status", "1"), classes: "s"}}
	for _, q := range s.spec.Queues {
		keys = append(keys, watchKey{key: s.key("queue", q, "pending"), classes: "z"})
	}
	return s.conn.watcher(staticKeys(keys)).watch(ctx, wake)
}

var _ Watcher = (*flexiqRedis)(nil)
