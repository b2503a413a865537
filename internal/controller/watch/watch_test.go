package watch

import (
	"slices"
	"testing"
	"time"
)

// TestWakeLimiter replays wake-ups at the given offsets (ms) against the
// limiter, making each kick when it falls due, as relayWakes does, and
// checks when the kicks happen.
func TestWakeLimiter(t *testing.T) {
	ms := func(xs ...int) []int { return xs }
	tests := []struct {
		name  string
		wakes []int
		kicks []int
	}{
		{"one wake-up ticks at once", ms(0), ms(0)},
		{"wake-ups far apart each tick at once", ms(0, 300, 1000), ms(0, 300, 1000)},
		{"exactly the gap apart is allowed", ms(0, 250, 500), ms(0, 250, 500)},
		{"a second one within the gap waits for its end", ms(0, 100), ms(0, 250)},
		{"several within the gap make one kick", ms(0, 10, 20, 100, 249), ms(0, 250)},
		{"a wake-up while one is pending is covered by it", ms(0, 100, 200, 260), ms(0, 250, 500)},
		{"a stream: one kick per gap, the last covering the tail", ms(0, 50, 100, 150, 200, 250, 300, 350, 400, 450, 500, 550, 600, 650, 700, 750, 800, 850, 900, 950),
			ms(0, 250, 500, 750, 1000)},
		{"quiet again: at once", ms(0, 100, 700), ms(0, 250, 700)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := time.Unix(0, 0).Add(time.Hour)
			at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
			lim := wakeLimiter{gap: Gap}
			var kicks []int
			kick := func(now time.Time) {
				kicks = append(kicks, int(now.Sub(base)/time.Millisecond))
				lim.fire(now)
			}
			for _, w := range tc.wakes {
				now := at(w)
				// A pending kick whose time came before this wake-up is
				// made first, as relayWakes's timer does.
				if !lim.due.IsZero() && !lim.due.After(now) {
					kick(lim.due)
				}
				if due := lim.wake(now); !due.After(now) {
					kick(now)
				}
			}
			if !lim.due.IsZero() {
				kick(lim.due)
			}
			if !slices.Equal(kicks, tc.kicks) {
				t.Errorf("kicks at %v ms, want %v", kicks, tc.kicks)
			}
			for i := 1; i < len(kicks); i++ {
				if kicks[i]-kicks[i-1] < int(Gap/time.Millisecond) {
					t.Errorf("kicks %d and %d are less than %s apart", kicks[i-1], kicks[i], Gap)
				}
			}
		})
	}
}
