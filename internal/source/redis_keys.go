package source

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/redis/go-redis/v9"
)

// TypeRedis is the generic redis type: it counts a list of keys, each by
// its type, as pending or running. The presets (bullmq.go, celery.go, rq.go,
// sidekiq.go) count their systems' keys with the same code (redis.go).
const TypeRedis = "redis"

// Roles of a generic redis key.
const (
	RolePending = "pending"
	RoleRunning = "running"
)

// RedisSettings are a redis source's keys.
type RedisSettings struct {
	config.Conn
	// Keys are the keys to count, each by its type.
	Keys []RedisKey `toml:"keys,omitempty"`
}

// RedisKey is one [[pools.NAME.source.keys]] entry.
type RedisKey struct {
	Key  string `toml:"key"`  // the Redis key
	Role string `toml:"role"` // RolePending or RoleRunning
	// Min and Max bound a sorted set's scores (ZCOUNT); both empty means
	// the whole set (ZCARD). Each is a ScoreBound as written.
	Min string `toml:"min,omitempty"`
	Max string `toml:"max,omitempty"`
}

func init() {
	define(config.SourceType{
		Name: TypeRedis,
		Doc: "Counts a list of Redis keys, each by its type, as pending or running: a list, set or hash by its " +
			"length, a sorted set by its cardinality or, with min or max, by ZCOUNT over a score range. The URL is " +
			"redis://, rediss:// (TLS) or unix://.",
		Keys: append(slices.Clone(config.ConnKeys), config.KeyDoc{Name: "keys", Type: "array of tables", Required: true,
			Limits: "at least one; each with key (required), role (pending or running, default pending), min and max",
			Doc: "The keys to count, one `[[pools.NAME.source.keys]]` table each: `key` is the Redis key, `role` " +
				"whether it counts as pending or running, and `min` and `max` bound a sorted set's scores: a number, " +
				"`-inf`, `+inf`, or `now` / `now_ms` (Unix seconds or milliseconds) shifted as in `now-60`, with `(` " +
				"before it for an exclusive bound. One end given leaves the range open at the other."}),
	}, Watches, decodeRedis, newRedisKeys)
}

func newRedisKeys(spec RedisSettings) (Source, error) {
	if len(spec.Keys) == 0 {
		return nil, fmt.Errorf("%s source: no keys", TypeRedis)
	}
	s := &redisKeys{conn: newRedisConn(TypeRedis, spec.Conn)}
	for _, k := range spec.Keys {
		ks := redisKeySpec{key: k.Key, running: k.Role == RoleRunning}
		if k.Min != "" || k.Max != "" {
			var err error
			if ks.min, err = ParseScoreBound(k.Min); err != nil {
				return nil, fmt.Errorf("%s source: key %q: min %w", TypeRedis, k.Key, err)
			}
			if ks.max, err = ParseScoreBound(k.Max); err != nil {
				return nil, fmt.Errorf("%s source: key %q: max %w", TypeRedis, k.Key, err)
			}
			ks.ranged = true
		}
		s.keys = append(s.keys, ks)
	}
	return s, nil
}

// decodeRedis checks the generic type: the connection and its keys.
func decodeRedis(d *config.SourceDecoder) RedisSettings {
	var s RedisSettings
	d.Conn(&s.Conn, redisSchemes...)
	s.Keys = decodeRedisKeys(d)
	return s
}

// redisKeyKeys are the keys of one [[pools.NAME.source.keys]] table.
var redisKeyKeys = []string{"key", "role", "min", "max"}

// redisKeyTables reads keys as an array of tables, [[keys]] or inline.
func redisKeyTables(d *config.SourceDecoder) ([]map[string]any, bool) {
	tables, ok := d.Raw("keys").([]map[string]any)
	if !ok {
		if arr, isArr := d.Raw("keys").([]any); isArr {
			// keys = [{ key = "q" }, ...]: inline tables.
			for _, a := range arr {
				m, isMap := a.(map[string]any)
				if !isMap {
					tables = nil
					break
				}
				tables = append(tables, m)
			}
			ok = tables != nil || len(arr) == 0
		}
	}
	if !ok {
		d.WrongType("keys", "an array of tables ([[keys]])")
	}
	return tables, ok
}

// decodeRedisKeys reads the generic type's [[pools.NAME.source.keys]].
func decodeRedisKeys(d *config.SourceDecoder) []RedisKey {
	if !d.Has("keys") {
		d.Errorf("keys", "missing: at least one [[%s]] table with key = \"...\"", d.Key("keys"))
		return nil
	}
	tables, ok := redisKeyTables(d)
	if !ok {
		return nil
	}
	if len(tables) == 0 {
		d.Errorf("keys", "must list at least one key")
		return nil
	}
	var keys []RedisKey
	for i, t := range tables {
		keys = append(keys, decodeRedisKey(d.Item("keys", i, t)))
	}
	return keys
}

// decodeRedisKey reads one key table.
func decodeRedisKey(d *config.SourceDecoder) RedisKey {
	for _, name := range d.Names() {
		if !slices.Contains(redisKeyKeys, name) {
			msg := "unknown key"
			for _, known := range redisKeyKeys {
				if config.EditDistance(name, known) <= 2 {
					msg += fmt.Sprintf("; did you mean %q?", known)
					break
				}
			}
			d.Errorf(name, "%s (a key table takes %s)", msg, strings.Join(redisKeyKeys, ", "))
		}
	}
	var rk RedisKey
	if !d.Has("key") {
		d.Errorf("key", "missing: the Redis key to count")
	} else if d.String("key", &rk.Key) && rk.Key == "" {
		d.Errorf("key", "must not be empty")
	}
	rk.Role = RolePending
	if d.Has("role") && d.String("role", &rk.Role) && rk.Role != RolePending && rk.Role != RoleRunning {
		d.Errorf("role", "%q: want %q or %q", rk.Role, RolePending, RoleRunning)
	}
	for _, b := range []struct {
		name string
		dst  *string
	}{{"min", &rk.Min}, {"max", &rk.Max}} {
		if !d.Has(b.name) {
			continue
		}
		switch n := d.Raw(b.name).(type) {
		case int64:
			*b.dst = strconv.FormatInt(n, 10)
		case float64:
			*b.dst = strconv.FormatFloat(n, 'g', -1, 64)
		case string:
			*b.dst = n
		default:
			d.WrongType(b.name, "a number or a string (-inf, +inf, now, now_ms)")
			continue
		}
		if _, err := ParseScoreBound(*b.dst); err != nil {
			d.Errorf(b.name, "%v", err)
		}
	}
	// A range with one end given is open at the other.
	if rk.Min != "" && rk.Max == "" {
		rk.Max = "+inf"
	}
	if rk.Max != "" && rk.Min == "" {
		rk.Min = "-inf"
	}
	return rk
}

// A ScoreBound is one end of a score range: a number, -inf, +inf, or the
// time of the observation, as "now" (Unix seconds) or "now_ms" (Unix
// milliseconds), optionally shifted, as in "now-60" or "now_ms+5000".
// "(" before it makes it exclusive, as in Redis's own ZCOUNT.
type ScoreBound struct {
	Exclusive bool
	// Now is "", "s" or "ms": whether Value is added to the current time
	// in that unit.
	Now   string
	Value float64
}

// ParseScoreBound parses a bound as written in min or max.
func ParseScoreBound(s string) (ScoreBound, error) {
	var b ScoreBound
	rest := strings.TrimSpace(s)
	if r, ok := strings.CutPrefix(rest, "("); ok {
		b.Exclusive, rest = true, r
	}
	for _, now := range []struct{ word, unit string }{{"now_ms", "ms"}, {"now", "s"}} {
		if r, ok := strings.CutPrefix(rest, now.word); ok {
			b.Now, rest = now.unit, r
			break
		}
	}
	if b.Now != "" {
		if rest == "" {
			return b, nil
		}
		if rest[0] != '+' && rest[0] != '-' {
			return b, fmt.Errorf("%q: want now or now_ms, optionally followed by +N or -N", s)
		}
	}
	switch strings.ToLower(rest) {
	case "-inf":
		b.Value = math.Inf(-1)
	case "+inf", "inf":
		b.Value = math.Inf(1)
	default:
		v, err := strconv.ParseFloat(rest, 64)
		if err != nil || math.IsNaN(v) {
			return b, fmt.Errorf("%q: want a number, -inf, +inf, now or now_ms (with an optional +N or -N), with an optional ( for exclusive", s)
		}
		b.Value = v
	}
	if b.Now != "" && math.IsInf(b.Value, 0) {
		return b, fmt.Errorf("%q: an infinite offset from now", s)
	}
	return b, nil
}

// redisKeySpec is one key the generic source counts.
type redisKeySpec struct {
	key     string
	running bool
	// ranged keys are sorted sets counted over [min, max].
	ranged   bool
	min, max ScoreBound
}

type redisKeys struct {
	conn *redisConn
	keys []redisKeySpec
}

func (s *redisKeys) Observe(ctx context.Context, now time.Time) (Counts, error) {
	return s.conn.observe(ctx, now, func(ctx context.Context, c *redis.Client, now time.Time) (Counts, error) {
		counts := make([]redisCount, len(s.keys))
		for i, k := range s.keys {
			counts[i] = redisCount{key: k.key}
			if k.ranged {
				counts[i].zrange = &[2]string{scoreArg(k.min, now), scoreArg(k.max, now)}
			}
		}
		n, err := countKeys(ctx, c, counts)
		if err != nil {
			return Counts{}, err
		}
		var out Counts
		for i, k := range s.keys {
			if k.running {
				out.Running += n[i]
			} else {
				out.Pending += n[i]
			}
		}
		return out, nil
	})
}

func (s *redisKeys) Close() error { return s.conn.Close() }

// scoreArg renders a bound as ZCOUNT takes it, with now put in.
func scoreArg(b ScoreBound, now time.Time) string {
	v := b.Value
	switch b.Now {
	case "s":
		v += float64(now.UnixMicro()) / 1e6
	case "ms":
		v += float64(now.UnixMicro()) / 1e3
	}
	var s string
	switch {
	case math.IsInf(v, 1):
		s = "+inf"
	case math.IsInf(v, -1):
		s = "-inf"
	default:
		s = strconv.FormatFloat(v, 'f', -1, 64)
	}
	if b.Exclusive {
		s = "(" + s
	}
	return s
}

// Watch wakes the pool on writes to the source's keys (see redisWatch).
func (s *redisKeys) Watch(ctx context.Context, wake func()) (string, error) {
	return s.conn.watcher(func(ctx context.Context, c *redis.Client) ([]watchKey, error) {
		// A key's type decides its events' class: the ranged keys are
		// sorted sets; the others are asked for.
		types := make([]*redis.StatusCmd, len(s.keys))
		if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range s.keys {
				if !k.ranged {
					types[i] = p.Type(ctx, k.key)
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
		keys := make([]watchKey, len(s.keys))
		for i, k := range s.keys {
			keys[i] = watchKey{key: k.key, classes: "z"}
			if !k.ranged {
				keys[i].classes = keyClasses(types[i].Val())
			}
		}
		return keys, nil
	}).watch(ctx, wake)
}

// keyClasses is the class a key of type typ is written in; a key that does
// not exist (a list vanishes when emptied) will be one of the types the
// generic source counts, any of whose classes will do.
func keyClasses(typ string) string {
	if c, ok := typeClasses[typ]; ok {
		return c
	}
	return "lzsh"
}

var _ Watcher = (*redisKeys)(nil)
