package source

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// Issue 17, item 6: a hostile Redis announcing huge lengths made go-redis
// panic (makeslice) or allocate gigabytes in one read. Each reply here is
// now a clean source error, and one observation allocates a few MiB at
// most. (On the code before the fix, the first case crashed the test
// binary and the second allocated 1 GiB.)
func TestHostileRedis(t *testing.T) {
	zeros := make([]byte, 64<<10)
	aaa := []byte(strings.Repeat("a", 64<<10))
	scan := func(agg string) func([]string) (string, []byte, int64) {
		// A Sidekiq source: queue:q empty, one process, whose scan (or,
		// before, SMEMBERS) announces a huge aggregate.
		return func(cmd []string) (string, []byte, int64) {
			switch strings.ToUpper(cmd[0]) {
			case "TYPE":
				if cmd[1] == "processes" {
					return "+set\r\n", nil, 0
				}
				return "+none\r\n", nil, 0
			case "SCARD":
				return ":1\r\n", nil, 0
			case "SMEMBERS":
				return agg, nil, 0
			case "SSCAN":
				return "*2\r\n$1\r\n0\r\n" + agg, nil, 0
			}
			return "-ERR unknown command\r\n", nil, 0
		}
	}
	typeReply := func(resp string, stream []byte, n int64) func([]string) (string, []byte, int64) {
		return func(cmd []string) (string, []byte, int64) {
			if strings.ToUpper(cmd[0]) == "TYPE" {
				return resp, stream, n
			}
			return "-ERR unknown command\r\n", nil, 0 // HELLO and the like
		}
	}
	tests := []struct {
		name  string
		typ   string
		reply func([]string) (string, []byte, int64)
		want  string
	}{
		{"bulk length past what make takes", TypeRedis, typeReply("$1125899906842624\r\n", nil, 0), "a bulk string of 1125899906842624 bytes"},
		{"a 1 GiB bulk, sent", TypeRedis, typeReply("$1073741824\r\n", zeros, 1<<30+2), "a bulk string of 1073741824 bytes"},
		{"a status line without end", TypeRedis, typeReply("+", aaa, 256<<20), "line of more than"},
		{"an array of 2^50 in a scan", TypeSidekiq, scan("*1125899906842624\r\n"), "of 1125899906842624 elements"},
		{"an array of 10^8 in a scan", TypeSidekiq, scan("*100000000\r\n"), "of 100000000 elements"},
		{"a map of 10^8 in a scan", TypeSidekiq, scan("%100000000\r\n"), "of 100000000 elements"},
		{"a set of 10^8 in a scan", TypeSidekiq, scan("~100000000\r\n"), "of 100000000 elements"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startFakeRedis(t, "127.0.0.1:0", tc.reply)
			conn := config.Conn{URL: srv.url()}
			spec := config.Source{Type: tc.typ, Settings: SidekiqSettings{Conn: conn, Queues: []string{"q"}}}
			if tc.typ == TypeRedis {
				spec.Settings = RedisSettings{Conn: conn, Keys: []RedisKey{{Key: "q"}}}
			}
			src := mustNew(t, spec)
			defer src.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := src.Observe(ctx, time.Now())
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "reply too large") {
				t.Errorf("Observe: %v, want a reply-too-large error saying %q", err, tc.want)
			}
			var pe *PanicError
			if errors.As(err, &pe) {
				t.Errorf("the reply made the client panic (guarded): %v", err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
				t.Errorf("one observation allocated %d MiB, want at most 32", alloc>>20)
			}
		})
	}
}
