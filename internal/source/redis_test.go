package source

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestScoreArg(t *testing.T) {
	now := time.Unix(1_700_000_000, 250_000_000)
	tests := []struct {
		b    ScoreBound
		want string
	}{
		{ScoreBound{Value: 5}, "5"},
		{ScoreBound{Value: -2.5, Exclusive: true}, "(-2.5"},
		{ScoreBound{Value: math.Inf(1)}, "+inf"},
		{ScoreBound{Value: math.Inf(-1), Exclusive: true}, "(-inf"},
		{ScoreBound{Now: "s"}, "1700000000.25"},
		{ScoreBound{Now: "s", Value: -60}, "1699999940.25"},
		{ScoreBound{Now: "ms"}, "1700000000250"},
		{ScoreBound{Now: "ms", Value: 1000, Exclusive: true}, "(1700000001250"},
	}
	for _, tc := range tests {
		if got := scoreArg(tc.b, now); got != tc.want {
			t.Errorf("scoreArg(%+v) = %q, want %q", tc.b, got, tc.want)
		}
	}
}

// The delayed set's scores are near 7e15, under 2^53: the bound is exact,
// and a job of the current millisecond is due whatever its counter.
func TestBullMQDueMax(t *testing.T) {
	now := time.UnixMilli(1_764_000_000_123)
	got := bullmqDueMax(now)
	if want := fmt.Sprint(int64(1_764_000_000_123)*4096 + 4095); got != want {
		t.Fatalf("bullmqDueMax = %s, want %s", got, want)
	}
	due := float64(now.UnixMilli()*4096 + 4095)
	next := float64((now.UnixMilli() + 1) * 4096)
	if due >= next || float64(int64(due)) != due {
		t.Errorf("scores lose precision at %v: due %v, next ms %v", now, due, next)
	}
}

func TestParseRQTime(t *testing.T) {
	want := time.Date(2025, 3, 1, 12, 0, 5, 123456000, time.UTC)
	for _, s := range []string{"2025-03-01T12:00:05.123456Z", "2025-03-01T12:00:05.123456+00:00", "2025-03-01T12:00:05.123456"} {
		got, ok := parseRQTime(s)
		if !ok || !got.Equal(want) {
			t.Errorf("parseRQTime(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
	if _, ok := parseRQTime("yesterday"); ok {
		t.Error("parseRQTime(yesterday) succeeded")
	}
}

func TestSidekiqEnqueuedAt(t *testing.T) {
	tests := []struct {
		job  string
		want time.Time
		ok   bool
	}{
		{`{"class":"X","enqueued_at":1764000000123}`, time.UnixMilli(1764000000123), true}, // Sidekiq 8: ms
		{`{"class":"X","enqueued_at":1764000000.5}`, time.UnixMilli(1764000000500), true},  // before: float s
		{`{"class":"X"}`, time.Time{}, false},
		{`not json`, time.Time{}, false},
	}
	for _, tc := range tests {
		got, ok := sidekiqEnqueuedAt(tc.job)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("sidekiqEnqueuedAt(%s) = %v, %v; want %v, %v", tc.job, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCeleryRoutingKey(t *testing.T) {
	for entry, want := range map[string]string{
		`[{"body":"x"}, "", "mail"]`:      "mail",
		`[{"body":"x"}, "celery", "sms"]`: "sms",
		`[{"body":"x"}, ""]`:              "",
		`{}`:                              "",
	} {
		got, ok := celeryRoutingKey(entry)
		if got != want || ok != (want != "") {
			t.Errorf("celeryRoutingKey(%s) = %q, %v; want %q", entry, got, ok, want)
		}
	}
}
