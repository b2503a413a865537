package slots

import (
	"slices"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
)

// TestGroupExit: the rank named for a group's end, from the ranks as
// units.Manager lists them (FoldRanks: rank 0 speaks for the group, with
// the group's state and the first failure's Result): the rank that failed
// first, by the time it went down, not rank 0 standing for the group.
func TestGroupExit(t *testing.T) {
	// rank is one rank's own unit: its state, Result and the moment it
	// went down (InactiveEnterTimestampMonotonic, in seconds).
	rank := func(r int, state, result string, down time.Duration) units.Worker {
		w := units.Worker{Unit: rankUnit("web", 1, r), Pool: "web", Slot: 1, Rank: r,
			ActiveState: state, Result: result, InactiveEnterMono: down * time.Second}
		switch result {
		case "signal":
			w.ExecMainCode, w.ExecMainStatus = 2, 9
		case "exit-code":
			w.ExecMainCode, w.ExecMainStatus = 1, 143
		}
		return w
	}
	cases := []struct {
		name   string
		ranks  []units.Worker // each loaded rank, as systemd has it
		want   int            // -2: the group is whole
		result string
	}{
		{"whole", []units.Worker{rank(0, "active", "success", 0), rank(1, "active", "success", 0), rank(2, "activating", "success", 0)}, -2, ""},
		// Issue 27 item 5: SIGKILL of rank 1, and BindsTo= stopped ranks 0
		// and 2 cleanly after it. The listing's rank 0 is "failed" with
		// Result=signal, but those are the group's, rank 1's.
		{"rank 1 killed, the others stopped by it", []units.Worker{rank(0, "inactive", "success", 6), rank(1, "failed", "signal", 5), rank(2, "inactive", "success", 6)}, 1, "signal"},
		{"rank 1 killed, rank 0 failed at its stop, later", []units.Worker{rank(0, "failed", "exit-code", 7), rank(1, "failed", "signal", 5), rank(2, "inactive", "success", 6)}, 1, "signal"},
		{"rank 2 killed, rank 0 still stopping", []units.Worker{rank(0, "deactivating", "success", 0), rank(1, "inactive", "success", 6), rank(2, "failed", "signal", 5)}, 2, "signal"},
		{"rank 1 killed, rank 0 still up", []units.Worker{rank(0, "active", "success", 0), rank(1, "failed", "signal", 5), rank(2, "deactivating", "success", 0)}, 1, "signal"},
		{"rank 0 killed first", []units.Worker{rank(0, "failed", "signal", 5), rank(1, "failed", "exit-code", 6), rank(2, "inactive", "success", 6)}, 0, "signal"},
		{"the earlier of two failures", []units.Worker{rank(0, "inactive", "success", 9), rank(1, "failed", "exit-code", 9), rank(2, "failed", "signal", 5)}, 2, "signal"},
		{"rank 0 unloaded, rank 1 failed", []units.Worker{rank(1, "failed", "signal", 5), rank(2, "inactive", "success", 6)}, 1, "signal"},
		{"a rank unloaded", []units.Worker{rank(0, "active", "success", 0), rank(2, "active", "success", 0)}, 1, "success"},
		{"rank 0 unloaded, the others stopping", []units.Worker{rank(1, "deactivating", "success", 0), rank(2, "deactivating", "success", 0)}, 0, "success"},
		{"rank 2 stopping", []units.Worker{rank(0, "active", "success", 0), rank(1, "active", "success", 0), rank(2, "deactivating", "success", 0)}, 2, "success"},
		{"nothing left", nil, -1, "success"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var w units.Worker
			l := units.FoldRanks(slices.Clone(tc.ranks))
			if len(l) == 1 {
				w = l[0]
			}
			e, ok := GroupExit("flexiq-web@1.service", w, len(l) == 1, 3)
			switch {
			case tc.want == -2:
				if ok {
					t.Errorf("exit %+v, want none", e)
				}
				return
			case !ok || e.Rank != tc.want:
				t.Fatalf("exit rank %d (%v) %+v, want rank %d", e.Rank, ok, e, tc.want)
			case e.Rank >= 0 && e.Unit != rankUnit("web", 1, e.Rank):
				t.Errorf("unit %s", e.Unit)
			}
			// As the crash entry gives it (controller.reporter.groupCrashed): an unloaded
			// rank exited cleanly.
			result := "success"
			if e.Loaded {
				result = e.W.Result
			}
			if result != tc.result {
				t.Errorf("Result %q, want %q (%+v)", result, tc.result, e.W)
			}
		})
	}
}

func TestListedGroupSize(t *testing.T) {
	cases := []struct {
		w    units.Worker
		want int
	}{
		{units.Worker{}, 1},
		{units.Worker{Environment: []string{"A=1", "FLEXIQ_GROUP_SIZE=4"}, Ranks: make([]units.Worker, 1)}, 4},
		{units.Worker{Environment: []string{"FLEXIQ_GROUP_SIZE=x"}, Ranks: make([]units.Worker, 2)}, 3},
		{units.Worker{Ranks: make([]units.Worker, 2)}, 3},
	}
	for i, tc := range cases {
		if got := ListedGroupSize(tc.w); got != tc.want {
			t.Errorf("case %d: ListedGroupSize = %d, want %d", i, got, tc.want)
		}
	}
}
