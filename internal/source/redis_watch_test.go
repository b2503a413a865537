package source

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// Which notify-keyspace-events settings cover which keys, and the least
// setting the message asks for.
func TestKeyspaceFlagsCover(t *testing.T) {
	list := watchKey{"q", "l"}
	zset := watchKey{"z", "z"}
	set := watchKey{"s", "s"}
	unknown := watchKey{"new", "lzsh"} // a generic key not there yet
	tests := []struct {
		flags string
		keys  []watchKey
		ok    bool
		need  string
	}{
		{"", []watchKey{list}, false, "Kl"},             // Debian's default
		{"Ex", []watchKey{list}, false, "KlEx"},         // keyevent and expiry only: keep them, add K and l
		{"El", []watchKey{list}, false, "KEl"},          // keyevent channels only: no keyspace channel
		{"Kl", []watchKey{list}, true, "Kl"},            // the least for a list
		{"lK", []watchKey{list}, true, "lK"},            // any order, as CONFIG GET may report it
		{"Kl", []watchKey{list, zset}, false, "Klz"},    // the sorted set is missing
		{"KA", []watchKey{list, zset, set}, true, "KA"}, // A is every class
		{"AKE", []watchKey{list, zset}, true, "AKE"},
		{"A", []watchKey{list}, false, "KA"},     // A without K publishes nothing to keyspace channels
		{"Kg$", []watchKey{list}, false, "Klg$"}, // generic and string events do not cover a list
		{"Kz", []watchKey{zset, set}, false, "Kzs"},
		{"Kzs", []watchKey{zset, set}, true, "Kzs"},
		{"Kh", []watchKey{unknown}, true, "Kh"}, // any countable type's class covers a key not there yet
		{"K$", []watchKey{unknown}, false, "Kl$"},
		{"Klz", []watchKey{list, list, zset, zset}, true, "Klz"},
		{"", []watchKey{list, list, zset}, false, "Klz"}, // each class asked for once
		{"Kn", []watchKey{list}, false, "Kln"},           // n (new key) is not l
	}
	for _, tc := range tests {
		ok, need := parseKeyspaceFlags(tc.flags).covers(tc.keys)
		if !sameRunes(need, tc.need) || ok != tc.ok {
			t.Errorf("flags %q keys %v: covers = %v, need %q; want %v, %q", tc.flags, tc.keys, ok, need, tc.ok, tc.need)
		}
	}
	if got := leastFlags([]watchKey{zset, list, set}); got != "Kzls" {
		t.Errorf("leastFlags = %q, want %q", got, "Kzls")
	}
}

// sameRunes compares two flag strings as sets.
func sameRunes(a, b string) bool {
	for _, r := range a {
		if !strings.ContainsRune(b, r) {
			return false
		}
	}
	for _, r := range b {
		if !strings.ContainsRune(a, r) {
			return false
		}
	}
	return true
}

func TestKeyClasses(t *testing.T) {
	for typ, want := range map[string]string{"list": "l", "zset": "z", "set": "s", "hash": "h", "none": "lzsh", "stream": "t", "string": "$"} {
		if got := keyClasses(typ); got != want {
			t.Errorf("keyClasses(%q) = %q, want %q", typ, got, want)
		}
	}
}

func TestConfigRefused(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{replyErr("NOPERM User flexiq has no permissions to run the 'config|get' command"), true},
		{replyErr("ERR unknown command 'CONFIG', with args beginning with: 'GET'"), true},
		{replyErr("NOAUTH Authentication required."), false},
		{replyErr("WRONGPASS invalid username-password pair or user is disabled."), false},
		{replyErr("LOADING Redis is loading the dataset in memory"), false},
		{errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"), false},
		{context.DeadlineExceeded, false},
	}
	for _, tc := range tests {
		if got := configRefused(tc.err); got != tc.want {
			t.Errorf("configRefused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// Against a real server (test/e2e's TestRedisWakeUp runs it in its sandbox,
// with FLEXIQ_TEST_REDIS_URL set and notify-keyspace-events "Klzs"): every
// Redis source wakes on its system's writes, and its watcher ends as soon
// as its context does, with its subscription open.
func TestRedisWatch(t *testing.T) {
	url := os.Getenv("FLEXIQ_TEST_REDIS_URL")
	if url == "" {
		t.Skip("needs FLEXIQ_TEST_REDIS_URL: test/e2e runs this against redis-server in its sandbox")
	}
	c := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(url, "redis://")})
	defer c.Close()
	for _, tc := range []struct {
		typ   string
		spec  func(config.Conn) any // the settings, connecting so
		watch string                // one of the keys it watches
		push  func(ctx context.Context) error
	}{
		{TypeRedis, func(c config.Conn) any { return RedisSettings{Conn: c, Keys: []RedisKey{{Key: "w:jobs"}}} }, "w:jobs",
			func(ctx context.Context) error { return c.RPush(ctx, "w:jobs", "1").Err() }},
		{TypeBullMQ, func(c config.Conn) any { return BullMQSettings{Conn: c, Queues: []string{"w"}} }, "bull:w:prioritized",
			func(ctx context.Context) error {
				return c.ZAdd(ctx, "bull:w:prioritized", redis.Z{Score: 1, Member: "1"}).Err()
			}},
		{TypeCelery, func(c config.Conn) any { return CelerySettings{Conn: c, Queues: []string{"w"}} }, "w\x06\x163",
			func(ctx context.Context) error { return c.LPush(ctx, "w\x06\x163", "m").Err() }},
		{TypeRQ, func(c config.Conn) any { return RQSettings{Conn: c, Queues: []string{"w"}} }, "rq:queue:w",
			func(ctx context.Context) error { return c.RPush(ctx, "rq:queue:w", "j").Err() }},
		{TypeSidekiq, func(c config.Conn) any { return SidekiqSettings{Conn: c, Queues: []string{"w"}} }, "queue:w",
			func(ctx context.Context) error { return c.LPush(ctx, "queue:w", "{}").Err() }},
		{TypeFlexiqRedis, func(c config.Conn) any { return FlexiqRedisSettings{Conn: c, Queues: []string{"w"}} }, "flexiq:queue:w:pending",
			func(ctx context.Context) error {
				return c.ZAdd(ctx, "flexiq:queue:w:pending", redis.Z{Score: 9e15, Member: "j"}).Err()
			}},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			src, err := New(config.Source{Type: tc.typ, Settings: tc.spec(config.Conn{URL: url})})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			how, wait := watchWakes(ctx, t, src)
			t.Logf("%s", how)
			wait("subscribing")
			if err := tc.push(ctx); err != nil {
				t.Fatal(err)
			}
			wait("a write")
			// The server drops the watcher's connection: it subscribes
			// again, and wakes the pool for what it may have missed.
			if err := c.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
				t.Fatal(err)
			}
			wait("the resubscription")
			cancel()
			ok := false
			for range 50 {
				n, err := c.PubSubNumSub(context.Background(), "__keyspace@0__:"+tc.watch).Result()
				if err == nil && n["__keyspace@0__:"+tc.watch] == 0 {
					ok = true
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !ok {
				t.Fatal("still subscribed 1 s after the context ended")
			}
		})
	}
}

// replyErr is an error reply of the server's, as go-redis returns it.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// A user whose ACL refuses CONFIG GET still gets wake-ups, and the
// description says that the watcher cannot tell whether the server sends
// them. Run with TestRedisWatch's server.
func TestRedisWatchConfigRefused(t *testing.T) {
	url := os.Getenv("FLEXIQ_TEST_REDIS_URL")
	if url == "" {
		t.Skip("needs FLEXIQ_TEST_REDIS_URL: test/e2e runs this against redis-server in its sandbox")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(url, "redis://")})
	defer c.Close()
	if err := c.Do(ctx, "ACL", "SETUSER", "noconfig", "reset", "on", ">pw", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Do(context.Background(), "ACL", "DELUSER", "noconfig")
	src, err := New(config.Source{Type: TypeRQ, Settings: RQSettings{Queues: []string{"acl"},
		Conn: config.Conn{URL: strings.Replace(url, "redis://", "redis://noconfig:pw@", 1)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	how, wait := watchWakes(ctx, t, src)
	if want := `CONFIG GET is refused (NOPERM`; !strings.Contains(how, want) || !strings.Contains(how, `cannot tell whether the server sends them: they need notify-keyspace-events to hold at least "Kl"`) {
		t.Errorf("Watch says %q, want it to say %s and that it cannot tell", how, want)
	}
	t.Log(how)
	wait("subscribing")
	if err := c.RPush(ctx, "rq:queue:acl", "j").Err(); err != nil {
		t.Fatal(err)
	}
	wait("a push")
}

// watchWakes starts src's Watch, and returns its description and a wait
// for the next wake-up, failing the test after 5 s without one.
func watchWakes(ctx context.Context, t *testing.T, src Source) (string, func(what string)) {
	t.Helper()
	wakes := make(chan struct{}, 100)
	how, err := mustAs[Watcher](t, src).Watch(ctx, func() {
		select {
		case wakes <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return how, func(what string) {
		t.Helper()
		select {
		case <-wakes:
		case <-time.After(5 * time.Second):
			t.Fatalf("no wake-up within 5 s of %s", what)
		}
	}
}
