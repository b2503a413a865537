package conn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

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

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestRedisFail(t *testing.T) {
	c := NewRedis("rq", "source", config.Conn{URL: "redis://127.0.0.1:6379"})
	tests := []struct {
		err  error
		want string
	}{
		{errors.New("WRONGPASS invalid username-password pair or user is disabled."), "rq source redis://127.0.0.1:6379: authentication failed: WRONGPASS"},
		{errors.New("NOAUTH Authentication required."), "authentication failed: NOAUTH"},
		{errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"), "unreachable: dial tcp"},
		{&WrongTypeError{Key: "q", Type: "string", Want: "a list"}, `wrong key type: WRONGTYPE: key "q" is a string`},
		{fmt.Errorf("queue x: %w", context.DeadlineExceeded), "timed out"},
		{timeoutErr{}, "timed out"},
		{errors.New("ERR unknown command"), "query failed: ERR unknown command"},
	}
	for _, tc := range tests {
		if got := c.Fail(tc.err).Error(); !strings.Contains(got, tc.want) {
			t.Errorf("fail(%v) = %q, want it to contain %q", tc.err, got, tc.want)
		}
	}
}

// A password from password_file never shows in a message.
func TestRedisServerRedacted(t *testing.T) {
	c := NewRedis("redis", "source", config.Conn{URL: "redis://u:secret@127.0.0.1:1"})
	if _, err := c.Client(); err != nil {
		t.Fatal(err)
	}
	if got := c.Fail(errors.New("x")).Error(); strings.Contains(got, "secret") || !strings.Contains(got, "xxxxx") {
		t.Errorf("fail = %q, want the password redacted", got)
	}
	c.Close()
}
