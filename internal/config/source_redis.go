package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Source types of the Redis family: the generic one, which counts a list of
// keys, and the presets of the job queues kept on Redis, which build on the
// same counting.
const (
	SourceRedis   = "redis"
	SourceBullMQ  = "bullmq"
	SourceCelery  = "celery"
	SourceRQ      = "rq"
	SourceSidekiq = "sidekiq"
)

// Roles of a generic redis key.
const (
	RolePending = "pending"
	RoleRunning = "running"
)

// DefaultBullMQPrefix is BullMQ's own default for its prefix option.
const DefaultBullMQPrefix = "bull"

// Redis holds the settings of the source types redis, bullmq, celery, rq
// and sidekiq.
type Redis struct {
	// Keys are the generic type's keys, each counted by its type.
	Keys []RedisKey
}

// RedisKey is one [[pools.NAME.source.keys]] entry.
type RedisKey struct {
	Key  string // the Redis key
	Role string // RolePending or RoleRunning
	// Min and Max bound a sorted set's scores (ZCOUNT); both empty means
	// the whole set (ZCARD). Each is a ScoreBound as written.
	Min, Max string
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

// rawRedis holds their keys as written; embedded in rawSource, so that its
// fields are keys of [pools.NAME.source] itself.
type rawRedis struct {
	// Keys is an array of tables. As a value, the decoder leaves its
	// sub-keys to checkRedisKeys, which reports the unknown ones itself.
	Keys value `toml:"keys"`
}

// effectiveRedis is how WriteEffective writes them; embedded in
// effectiveSource. Fields need omitempty: other types leave them unset.
type effectiveRedis struct {
	Keys []effectiveRedisKey `toml:"keys,omitempty"`
}

type effectiveRedisKey struct {
	Key  string `toml:"key"`
	Role string `toml:"role"`
	Min  string `toml:"min,omitempty"`
	Max  string `toml:"max,omitempty"`
}

func (s Source) effectiveRedis() effectiveRedis {
	e := effectiveRedis{}
	for _, k := range s.Redis.Keys {
		e.Keys = append(e.Keys, effectiveRedisKey(k))
	}
	return e
}

// redisSchemes are go-redis's: TCP, TLS, and a Unix socket.
var redisSchemes = []string{"redis", "rediss", "unix"}

func init() {
	keys := func(extra ...string) []string { return append(slices.Clone(connKeys), extra...) }
	registerSource(sourceKind{name: SourceRedis, keys: keys("keys"), check: checkRedis})
	registerSource(sourceKind{name: SourceBullMQ, keys: keys("queues", "key_prefix"), check: checkRedis})
	registerSource(sourceKind{name: SourceCelery, keys: keys("queues", "key_prefix"), check: checkRedis})
	registerSource(sourceKind{name: SourceRQ, keys: keys("queues"), check: checkRedis})
	registerSource(sourceKind{name: SourceSidekiq, keys: keys("queues"), check: checkRedis})
}

// checkRedis checks the Redis family: the connection, and the generic
// type's keys or a preset's queues.
func checkRedis(l *loader, s *Source, r *rawSource, key func(string) string) {
	l.conn(s, r, key, redisSchemes...)
	if s.Type == SourceRedis {
		l.redisKeys(s, r, key)
		return
	}
	l.queues(s, r, key)
	if len(s.Queues) == 0 && !(r.Queues.set() && describe(r.Queues.raw) != "an array") {
		l.add(key("queues"), "required for %s sources: the queues to read (summed)", s.Type)
	}
	if s.Type == SourceBullMQ {
		s.KeyPrefix = DefaultBullMQPrefix
	}
	if l.str(key("key_prefix"), r.KeyPrefix, &s.KeyPrefix) && s.Type == SourceBullMQ && s.KeyPrefix == "" {
		l.add(key("key_prefix"), "must not be empty (BullMQ's default is %q)", DefaultBullMQPrefix)
	}
}

// redisKeyKeys are the keys of one [[pools.NAME.source.keys]] table.
var redisKeyKeys = []string{"key", "role", "min", "max"}

// redisKeys reads the generic type's [[pools.NAME.source.keys]].
func (l *loader) redisKeys(s *Source, r *rawSource, key func(string) string) {
	if !r.Keys.set() {
		l.add(key("keys"), "missing: at least one [[%s]] table with key = \"...\"", key("keys"))
		return
	}
	tables, ok := r.Keys.raw.([]map[string]any)
	if !ok {
		if arr, isArr := r.Keys.raw.([]any); isArr {
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
		l.wrongType(key("keys"), "an array of tables ([[keys]])", r.Keys)
		return
	}
	if len(tables) == 0 {
		l.add(key("keys"), "must list at least one key")
		return
	}
	for i, t := range tables {
		k := func(sub string) string { return fmt.Sprintf("%s[%d].%s", key("keys"), i, sub) }
		for _, name := range slices.Sorted(maps.Keys(t)) {
			if !slices.Contains(redisKeyKeys, name) {
				msg := "unknown key"
				for _, known := range redisKeyKeys {
					if editDistance(name, known) <= 2 {
						msg += fmt.Sprintf("; did you mean %q?", known)
						break
					}
				}
				l.add(k(name), "%s (a key table takes %s)", msg, strings.Join(redisKeyKeys, ", "))
			}
		}
		var rk RedisKey
		if v, has := t["key"]; !has {
			l.add(k("key"), "missing: the Redis key to count")
		} else if l.str(k("key"), value{v}, &rk.Key) && rk.Key == "" {
			l.add(k("key"), "must not be empty")
		}
		rk.Role = RolePending
		if v, has := t["role"]; has && l.str(k("role"), value{v}, &rk.Role) && rk.Role != RolePending && rk.Role != RoleRunning {
			l.add(k("role"), "%q: want %q or %q", rk.Role, RolePending, RoleRunning)
		}
		for _, b := range []struct {
			name string
			dst  *string
		}{{"min", &rk.Min}, {"max", &rk.Max}} {
			v, has := t[b.name]
			if !has {
				continue
			}
			switch n := v.(type) {
			case int64:
				*b.dst = strconv.FormatInt(n, 10)
			case float64:
				*b.dst = strconv.FormatFloat(n, 'g', -1, 64)
			case string:
				*b.dst = n
			default:
				l.wrongType(k(b.name), "a number or a string (-inf, +inf, now, now_ms)", value{v})
				continue
			}
			if _, err := ParseScoreBound(*b.dst); err != nil {
				l.add(k(b.name), "%v", err)
			}
		}
		// A range with one end given is open at the other.
		if rk.Min != "" && rk.Max == "" {
			rk.Max = "+inf"
		}
		if rk.Max != "" && rk.Min == "" {
			rk.Min = "-inf"
		}
		s.Redis.Keys = append(s.Redis.Keys, rk)
	}
}
