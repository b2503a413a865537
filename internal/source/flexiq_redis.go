package source

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// TypeFlexiqRedis reads flexiq's Redis storage.
const TypeFlexiqRedis = config.SourceFlexiqRedis

func init() {
	register(TypeFlexiqRedis, func(spec config.Source) (Source, error) { return newFlexiqRedis(spec) })
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
	spec   config.Source
	prefix string

	mu     sync.Mutex
	client *redis.Client
	srv    string
}

func newFlexiqRedis(spec config.Source) (*flexiqRedis, error) {
	if len(spec.Queues) == 0 {
		return nil, fmt.Errorf("%s source: queues is empty: flexiq keeps no list of its queues in Redis", TypeFlexiqRedis)
	}
	prefix := spec.KeyPrefix
	if prefix == "" {
		prefix = config.DefaultFlexiqKeyPrefix
	}
	return &flexiqRedis{spec: spec, prefix: prefix}, nil
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

// connect returns the client, making it on first use. go-redis keeps a pool
// of connections and redials after a failure; the password is re-read at
// every new connection (CredentialsProvider).
func (s *flexiqRedis) connect() (*redis.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		return s.client, nil
	}
	u, err := connURL(s.spec.Conn)
	if err != nil {
		return nil, fmt.Errorf("%s source: %w", TypeFlexiqRedis, err)
	}
	s.srv = redacted(u)
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("%s source %s: bad URL: %s", TypeFlexiqRedis, s.srv, redactErr(err, u.String()))
	}
	opts.PoolSize = 2
	opts.MaxRetries = 1
	opts.DialTimeout = 5 * time.Second
	opts.ReadTimeout = 5 * time.Second
	opts.WriteTimeout = 5 * time.Second
	opts.Protocol = 2 // plain RESP2: no HELLO, which older servers lack
	opts.DisableIdentity = true
	opts.CredentialsProvider = func() (string, string) {
		u, err := connURL(s.spec.Conn)
		if err != nil || u.User == nil {
			return opts.Username, opts.Password
		}
		p, _ := u.User.Password()
		return u.User.Username(), p
	}
	s.client = redis.NewClient(opts)
	return s.client, nil
}

func (s *flexiqRedis) fail(what string, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"),
		strings.Contains(msg, "AUTH") && strings.Contains(msg, "without any password"):
		msg = "authentication failed: " + msg
	case strings.Contains(msg, "WRONGTYPE"):
		msg = "a key is not of the type flexiq writes (wrong key_prefix, or another program's key): " + msg
	case errors.Is(err, context.DeadlineExceeded):
		msg = "timed out: " + msg
	}
	return fmt.Errorf("%s source %s: %s: %s", TypeFlexiqRedis, s.srv, what, msg)
}

// Observe reads every count in one MULTI/EXEC, so they are of one moment:
// per queue, one ZCOUNT and one ZRANGE (the band's oldest due job) per
// priority band, SINTERCARD of the running set and the queue's jobs, and
// the paused set. That is about 2,000 cheap commands per queue, in one
// round trip. With a namespace, observeNamespace reads instead.
func (s *flexiqRedis) Observe(ctx context.Context, now time.Time) (Counts, error) {
	client, err := s.connect()
	if err != nil {
		return Counts{}, err
	}
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
	var paused *redis.StringSliceCmd
	_, err = client.TxPipelined(ctx, func(p redis.Pipeliner) error {
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
		paused = p.SMembers(ctx, s.pausedKey())
		return nil
	})
	if err != nil {
		return Counts{}, s.fail("reading queues "+strings.Join(s.spec.Queues, ", "), err)
	}
	isPaused := setOf(paused.Val())
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

func setOf(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func (c *Counts) setOldest(nowMs, oldest int64) {
	if c.Pending > 0 && oldest != math.MaxInt64 {
		c.OldestAge = max(time.Duration(nowMs-oldest)*time.Millisecond, 0)
		c.HasOldest = true
	}
}

// observeNamespace reads a namespace's counts. flexiq's pending sets hold
// every namespace's jobs, and only the set jobs:by_ns:<segment>
// (helpers.rs) says whose a job is: so the due ids are read (one ZRANGE per
// band, in one MULTI with the running count, which SINTERCARD takes over
// the namespace's set too, and the paused set), and then checked against
// the namespace's set in a second round trip. It costs what the due jobs
// weigh, where the count without a namespace costs nothing per job.
func (s *flexiqRedis) observeNamespace(ctx context.Context, client *redis.Client, now time.Time) (Counts, error) {
	nowMs := now.UnixMilli()
	ranges := dueRanges(nowMs)
	byNS := s.key("jobs", "by_ns", namespaceSegment(s.spec.Namespace))
	due := make([][]*redis.ZSliceCmd, len(s.spec.Queues))
	running := make([]*redis.IntCmd, len(s.spec.Queues))
	var paused *redis.StringSliceCmd
	_, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range s.spec.Queues {
			pending := s.key("queue", q, "pending")
			for _, r := range ranges {
				due[i] = append(due[i], p.ZRangeByScoreWithScores(ctx, pending,
					&redis.ZRangeBy{Min: fmtScore(r.min), Max: fmtScore(r.max)}))
			}
			running[i] = p.SInterCard(ctx, 0, s.key("jobs", "status", "1"), s.key("jobs", "by_queue", q), byNS)
		}
		paused = p.SMembers(ctx, s.pausedKey())
		return nil
	})
	if err != nil {
		return Counts{}, s.fail("reading queues "+strings.Join(s.spec.Queues, ", "), err)
	}
	isPaused := setOf(paused.Val())
	var c Counts
	oldest := int64(math.MaxInt64)
	for i, q := range s.spec.Queues {
		c.Running += running[i].Val()
		var ids []string
		var scores []float64
		for _, cmd := range due[i] {
			for _, z := range cmd.Val() {
				id, _ := z.Member.(string)
				ids, scores = append(ids, id), append(scores, z.Score)
			}
		}
		if len(ids) == 0 {
			continue
		}
		mine, err := client.SMIsMember(ctx, byNS, toAny(ids)...).Result()
		if err != nil {
			return Counts{}, s.fail("reading namespace "+s.spec.Namespace, err)
		}
		for j, in := range mine {
			switch {
			case !in:
			case isPaused[q]:
				c.Paused++
			default:
				c.Pending++
				oldest = min(oldest, scheduledAt(scores[j]))
			}
		}
	}
	c.setOldest(nowMs, oldest)
	return c, nil
}

func toAny(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// Threads reads the worker registry (workers.rs): SMEMBERS workers:all, then
// each worker's hash in one pipeline. A hash without a namespace field was
// registered before flexiq's #836: the default namespace's.
func (s *flexiqRedis) Threads(ctx context.Context, now time.Time) (int, bool, error) {
	client, err := s.connect()
	if err != nil {
		return 0, false, err
	}
	ids, err := client.SMembers(ctx, s.key("workers", "all")).Result()
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

func (s *flexiqRedis) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		err := s.client.Close()
		s.client = nil
		return err
	}
	return nil
}
