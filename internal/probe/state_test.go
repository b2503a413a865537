package probe

import (
	"testing"
	"time"
)

func TestTracker(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(i int) time.Time { return start.Add(time.Duration(i+1) * time.Second) }
	// Each result is one attempt, a second apart; want is the state after
	// each, sinceIdx the attempt whose time NotReadySince holds at the end
	// (-1: the start, -2: zero because Ready).
	tests := []struct {
		name             string
		success, failure int
		initial          State
		results          string // p pass, f fail
		want             []State
		sinceIdx         int
	}{
		{"one pass makes ready with threshold 1", 1, 3, Unknown, "p", []State{Ready}, -2},
		{"passes below threshold stay unknown", 3, 1, Unknown, "pp", []State{Unknown, Unknown}, -1},
		{"a failure restarts the pass count", 2, 3, Unknown, "pfpp", []State{Unknown, Unknown, Unknown, Ready}, -2},
		{"failures before ever ready stay unknown", 1, 1, Unknown, "fff", []State{Unknown, Unknown, Unknown}, -1},
		{"ready to not ready after failure threshold", 1, 3, Unknown, "pfff",
			[]State{Ready, Ready, Ready, NotReady}, 1},
		{"a pass restarts the failure count", 1, 2, Unknown, "pfpff",
			[]State{Ready, Ready, Ready, Ready, NotReady}, 3},
		{"not ready back to ready after success threshold", 2, 1, Unknown, "ppfpp",
			[]State{Unknown, Ready, NotReady, NotReady, Ready}, -2},
		{"adopted ready stays ready below failure threshold", 1, 3, Ready, "ff",
			[]State{Ready, Ready}, -2},
		{"adopted ready fails", 1, 2, Ready, "ff", []State{Ready, NotReady}, 0},
		{"threshold 0 counts as 1", 0, 0, Unknown, "pf", []State{Ready, NotReady}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(tc.success, tc.failure, tc.initial, start)
			for i, r := range tc.results {
				before := tr.State()
				from, changed := tr.Observe(r == 'p', at(i))
				if from != before || changed != (tr.State() != before) {
					t.Errorf("attempt %d: Observe = (%v, %v), state %v → %v", i, from, changed, before, tr.State())
				}
				if tr.State() != tc.want[i] {
					t.Fatalf("after attempt %d (%c): state %v, want %v", i, r, tr.State(), tc.want[i])
				}
			}
			var want time.Time
			switch tc.sinceIdx {
			case -1:
				want = start
			case -2:
			default:
				want = at(tc.sinceIdx)
			}
			if got := tr.NotReadySince(); !got.Equal(want) {
				t.Errorf("NotReadySince = %v, want %v", got, want)
			}
		})
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Unknown: "unknown", Ready: "ready", NotReady: "not-ready", State(9): "invalid"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(s), s.String(), want)
		}
	}
}
