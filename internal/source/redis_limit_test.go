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

// The parser follows replies through any split into reads, and refuses a
// reply at the header that breaks the budget, before its body.
func TestRespParser(t *testing.T) {
	const budget = 1000
	big := strings.Repeat("x", 990)
	tests := []struct {
		name, stream string
		refused      string // "" for accepted
	}{
		{"simple replies", "+OK\r\n:12\r\n-ERR no\r\n_\r\n,1.5\r\n#t\r\n(123\r\n", ""},
		{"bulk and null", "$3\r\nabc\r\n$-1\r\n*-1\r\n$0\r\n\r\n", ""},
		{"nested aggregates", "*2\r\n*2\r\n:1\r\n$1\r\na\r\n%1\r\n+k\r\n~1\r\n:2\r\n", ""},
		{"attribute before its reply", "|1\r\n+key\r\n+val\r\n:5\r\n", ""},
		{"empty aggregates", "*0\r\n%0\r\n~0\r\n", ""},
		{"budget starts over at each reply", "$990\r\n" + big + "\r\n$990\r\n" + big + "\r\n", ""},
		{"the issue's makeslice panic", "$1125899906842624\r\n", "a bulk string of 1125899906842624 bytes"},
		{"the issue's 2 GiB", "$1073741824\r\n", "a bulk string of 1073741824 bytes"},
		{"a length past int64", "$99999999999999999999\r\n", "length of 20 digits"},
		{"a length header without end", "*" + strings.Repeat("9", 30), "a length header of more than 24 bytes"},
		{"a bulk just over", "$997\r\n", "over the limit of 1000 bytes"},
		{"array", "*100000\r\n", `an aggregate '*' of 100000 elements`},
		{"map", "%200\r\n", `an aggregate '%' of 200 elements`},
		{"set", "~400\r\n", `an aggregate '~' of 400 elements`},
		{"push", ">400\r\n", `an aggregate '>' of 400 elements`},
		{"attribute", "|200\r\n", `an aggregate '|' of 200 elements`},
		{"nested headers that add up", "*2\r\n*100\r\n" + strings.Repeat(":1\r\n", 100) + "*100\r\n", "of 100 elements"},
		{"elements of one reply add up", "*2\r\n$600\r\n" + strings.Repeat("y", 600) + "\r\n$600\r\n", "a bulk string of 600 bytes"},
		{"a line without end", "+" + strings.Repeat("a", 2000), "line of more than 1000 bytes"},
		{"a streamed length", "$?\r\n", "unreadable length"},
		{"a negative length", "*-5\r\n", "unreadable length"},
	}
	for _, tc := range tests {
		for _, split := range []int{0, 1, 3} {
			p := respParser{budget: budget}
			var err error
			b := []byte(tc.stream)
			for len(b) > 0 && err == nil {
				k := len(b)
				if split > 0 {
					k = min(split, len(b))
				}
				err = p.feed(b[:k])
				b = b[k:]
			}
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("%s (reads of %d): refused: %v", tc.name, split, err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("%s (reads of %d): got %v, want a refusal saying %q", tc.name, split, err, tc.refused)
			case tc.refused == "" && (len(p.open) != 0 || p.cost != 0):
				t.Errorf("%s: left open %v, cost %d after whole replies", tc.name, p.open, p.cost)
			}
		}
	}
}

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
