package source

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func TestParseScoreBound(t *testing.T) {
	tests := []struct {
		in      string
		want    ScoreBound
		wantErr bool
	}{
		{"0", ScoreBound{Value: 0}, false},
		{"12.5", ScoreBound{Value: 12.5}, false},
		{"-inf", ScoreBound{Value: math.Inf(-1)}, false},
		{"+inf", ScoreBound{Value: math.Inf(1)}, false},
		{"inf", ScoreBound{Value: math.Inf(1)}, false},
		{"(5", ScoreBound{Exclusive: true, Value: 5}, false},
		{"now", ScoreBound{Now: "s"}, false},
		{"now_ms", ScoreBound{Now: "ms"}, false},
		{"now-60", ScoreBound{Now: "s", Value: -60}, false},
		{"now_ms+5000", ScoreBound{Now: "ms", Value: 5000}, false},
		{"(now", ScoreBound{Exclusive: true, Now: "s"}, false},
		{"now60", ScoreBound{}, true},
		{"now+inf", ScoreBound{}, true},
		{"nan", ScoreBound{}, true},
		{"soon", ScoreBound{}, true},
		{"", ScoreBound{}, true},
	}
	for _, tc := range tests {
		got, err := ParseScoreBound(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseScoreBound(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseScoreBound(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestRedisSources(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		want       []RedisKey // checked when no problem is expected
		wantPrefix string
		wantQ      []string
		problems   []string // substrings of the problems, in order
	}{
		{
			name: "generic keys",
			body: `type = "redis"
url = "redis://127.0.0.1:6379/0"
[[pools.email.source.keys]]
key = "jobs"
[[pools.email.source.keys]]
key = "busy"
role = "running"
[[pools.email.source.keys]]
key = "sched"
max = "now_ms"
[[pools.email.source.keys]]
key = "z"
min = 3
max = 4.5
`,
			want: []RedisKey{
				{Key: "jobs", Role: "pending"},
				{Key: "busy", Role: "running"},
				{Key: "sched", Role: "pending", Min: "-inf", Max: "now_ms"},
				{Key: "z", Role: "pending", Min: "3", Max: "4.5"},
			},
		},
		{
			name: "inline tables",
			body: `type = "redis"
url = "unix:///run/redis/redis.sock"
keys = [{ key = "a" }, { key = "b", role = "running" }]`,
			want: []RedisKey{{Key: "a", Role: "pending"}, {Key: "b", Role: "running"}},
		},
		{
			name: "unknown and wrong sub-keys",
			body: `type = "redis"
url = "redis://h"
[[pools.email.source.keys]]
key = "a"
rol = "running"
[[pools.email.source.keys]]
role = "busy"
min = "soon"
`,
			problems: []string{
				`pools.email.source.keys[0].rol: unknown key; did you mean "role"?`,
				`pools.email.source.keys[1].key: missing`,
				`pools.email.source.keys[1].role: "busy"`,
				`pools.email.source.keys[1].min: "soon"`,
			},
		},
		{name: "no keys", body: `type = "redis"
url = "redis://h"`, problems: []string{"pools.email.source.keys: missing"}},
		{name: "keys not tables", body: `type = "redis"
url = "redis://h"
keys = ["a"]`, problems: []string{"pools.email.source.keys: must be an array of tables"}},
		{name: "bad scheme", body: `type = "redis"
url = "http://h"
keys = [{ key = "a" }]`, problems: []string{`pools.email.source.url: scheme "http"`}},
		{name: "bullmq default prefix", body: `type = "bullmq"
url = "rediss://h:6380"
queues = ["mail", "sms"]`, wantPrefix: "bull", wantQ: []string{"mail", "sms"}},
		{name: "celery prefix", body: `type = "celery"
url = "redis://h"
queues = ["celery"]
key_prefix = "app:"`, wantPrefix: "app:", wantQ: []string{"celery"}},
		{name: "preset needs queues", body: `type = "rq"
url = "redis://h"`, problems: []string{"pools.email.source.queues: required for rq sources"}},
		{name: "rq has no prefix", body: `type = "rq"
url = "redis://h"
queues = ["default"]
key_prefix = "x"`, problems: []string{"pools.email.source.key_prefix: only for bullmq, celery, flexiq-redis sources, not rq"}},
		{name: "keys only for redis", body: `type = "sidekiq"
url = "redis://h"
queues = ["default"]
keys = [{ key = "a" }]`, problems: []string{"pools.email.source.keys: only for redis sources, not sidekiq"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig(t, withSource(tc.body))
			if len(tc.problems) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				var queues []string
				var prefix string
				var redisKeys []RedisKey
				switch s := cfg.Pools["email"].Source.Settings.(type) {
				case RedisSettings:
					redisKeys = s.Keys
				case BullMQSettings:
					queues, prefix = s.Queues, s.KeyPrefix
				case CelerySettings:
					queues, prefix = s.Queues, s.KeyPrefix
				default:
					t.Fatalf("settings %T", s)
				}
				if prefix != tc.wantPrefix {
					t.Errorf("key_prefix %q, want %q", prefix, tc.wantPrefix)
				}
				if !reflect.DeepEqual(redisKeys, tc.want) {
					t.Errorf("keys = %+v, want %+v", redisKeys, tc.want)
				}
				if !reflect.DeepEqual(queues, tc.wantQ) {
					t.Errorf("Queues = %q, want %q", queues, tc.wantQ)
				}
				return
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error = %v, want problems %q", err, tc.problems)
			}
			if len(ce.Problems) != len(tc.problems) {
				t.Errorf("problems = %v, want %d", err, len(tc.problems))
			}
			msg := err.Error()
			for _, p := range tc.problems {
				if !strings.Contains(msg, p) {
					t.Errorf("problems %q lack %q", msg, p)
				}
			}
		})
	}
}

// The effective configuration of a redis source loads back to the same
// settings: its [[keys]] tables included.
func TestRedisEffectiveRoundTrip(t *testing.T) {
	cfg, err := loadConfig(t, withSource(`type = "redis"
url = "redis://127.0.0.1:6379/2"
[[pools.email.source.keys]]
key = "q"
[[pools.email.source.keys]]
key = "sched"
min = "(now-60"
role = "running"`))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := config.WriteEffective(&b, cfg); err != nil {
		t.Fatal(err)
	}
	again, err := loadConfig(t, b.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if got, want := again.Pools["email"].Source, cfg.Pools["email"].Source; !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: %+v, want %+v\n%s", got, want, b.String())
	}
}

// withSource is a valid one-pool config with the given [pools.email.source]
// body.
func withSource(body string) string {
	return `[pools.email]
app = "myapp.tasks:queue"
[pools.email.source]
` + body + "\n"
}
