package source

import (
	"math"
	"testing"
)

// The pending score's float64 precision at its edges: every due job lies
// in its band's range, every job scheduled after now whose score differs
// from now's lies outside all ranges, and near 1e16 (priorities 0..99, past
// 2^53) the score holds only every other millisecond.
func TestDueRangesPrecision(t *testing.T) {
	const now = int64(1_764_500_000_123) // 2025-11-30, ms; odd on purpose
	ranges := dueRanges(now)
	if len(ranges) != 1000 {
		t.Fatalf("%d ranges, want one per priority band (1000)", len(ranges))
	}
	for i := 1; i < len(ranges); i++ {
		if !(ranges[i-1].max < ranges[i].min) {
			t.Fatalf("ranges %d and %d overlap or are not ascending: %+v %+v", i-1, i, ranges[i-1], ranges[i])
		}
	}
	counted := func(score float64) int {
		n := 0
		for _, r := range ranges {
			if score >= r.min && score <= r.max {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		name     string
		priority int
		at       int64
		want     int // how many ranges count it: 0 or 1
	}{
		{"priority 0, due now", 0, now, 1},
		{"priority 0, due 1 ms ago", 0, now - 1, 1},
		{"priority 0, due long ago", 0, 0, 1},
		// now is odd: near 1e16 it rounds (ties to even) onto now+1, and
		// now+2 onto the same float64 too; now+3 is a float64 above them.
		{"priority 0, 3 ms ahead", 0, now + 3, 0},
		{"priority 0, 1 s ahead", 0, now + 1000, 0},
		{"priority 99 (last band past 2^53), due now", 99, now, 1},
		{"priority 99, 3 ms ahead", 99, now + 3, 0},
		{"priority 100 (exact band), due now", 100, now, 1},
		{"priority 100, 1 ms ahead", 100, now + 1, 0},
		{"priority 999, due now", 999, now, 1},
		{"priority 999, 1 ms ahead", 999, now + 1, 0},
		{"priority clamped below 0", -5, now, 1},
		{"priority clamped above 999", 5000, now + 1, 0},
		{"priority 500, far future", 500, 9_999_999_999_999, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			score := dequeueScore(tc.priority, tc.at)
			if got := counted(score); got != tc.want {
				t.Errorf("score %.0f counted in %d ranges, want %d", score, got, tc.want)
			}
		})
	}
	// Near 1e16 a job 1 or 2 ms ahead may round onto now's score: then, and
	// only then, it counts (at most 2 ms early), never twice; a due job
	// always counts.
	for _, p := range []int{0, 50, 99, 100, 999} {
		for _, d := range []int64{-3, -2, -1, 0, 1, 2, 3, 4} {
			ahead, atNow := dequeueScore(p, now+d), dequeueScore(p, now)
			want := 0
			if d <= 0 || ahead == atNow {
				want = 1
			}
			if got := counted(ahead); got != want {
				t.Errorf("priority %d, %d ms ahead (score %.0f, now's %.0f): counted %d, want %d", p, d, ahead, atNow, got, want)
			}
		}
	}
	// The premise of the above: past 2^53 float64 steps by 2.
	if s := dequeueScore(0, now); s < 1<<53 || math.Nextafter(s, math.Inf(1))-s != 2 {
		t.Errorf("score %.0f: expected past 2^53 with a step of 2", s)
	}
	if dequeueScore(0, now+1) != dequeueScore(0, now) || dequeueScore(0, now+3) == dequeueScore(0, now) {
		t.Errorf("expected now+1 to share now's score at priority 0, and now+3 not to")
	}
}

func TestScheduledAtFromScore(t *testing.T) {
	for _, tc := range []struct {
		priority int
		at       int64
		slack    int64
	}{
		{0, 1_764_500_000_123, 1}, {99, 1_764_500_000_125, 1}, {100, 1_764_500_000_123, 0},
		{999, 1_764_500_000_123, 0}, {500, 0, 0},
	} {
		got := scheduledAt(dequeueScore(tc.priority, tc.at))
		if d := got - tc.at; d < -tc.slack || d > tc.slack {
			t.Errorf("priority %d: scheduledAt = %d, want %d ± %d", tc.priority, got, tc.at, tc.slack)
		}
	}
}

func TestNamespaceSegment(t *testing.T) {
	for ns, want := range map[string]string{"": "-", "acme": "4:acme", "a:b": "3:a:b"} {
		if got := namespaceSegment(ns); got != want {
			t.Errorf("namespaceSegment(%q) = %q, want %q", ns, got, want)
		}
	}
}
