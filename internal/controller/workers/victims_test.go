package workers

import (
	"slices"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/units"
)

func TestPickVictims(t *testing.T) {
	w := func(slot int, util float64) *Worker { return &Worker{slot: slot, util: util} }
	tests := []struct {
		name string
		ws   []*Worker
		n    int
		want []int
	}{
		{"least CPU first", []*Worker{w(1, 0.9), w(2, 0.1), w(3, 0.5)}, 2, []int{2, 3}},
		{"ties go to the highest slot", []*Worker{w(1, 0), w(2, 0), w(3, 0)}, 2, []int{3, 2}},
		{"CPU beats slot order", []*Worker{w(1, 0), w(5, 0.7)}, 1, []int{1}},
		{"never more than there are", []*Worker{w(1, 0)}, 3, []int{1}},
		{"none", []*Worker{w(1, 0)}, 0, nil},
		{"outdated first, then CPU", []*Worker{w(1, 0), w(2, 0.9), rev(w(3, 0.8), "old"), rev(w(4, 0), "new")}, 2, []int{3, 4}},
		{"an unknown revision counts as current", []*Worker{rev(w(1, 0.5), ""), rev(w(2, 0.1), "new")}, 1, []int{2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			for _, v := range PickVictims(tc.ws, tc.n, "new") {
				got = append(got, v.slot)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("PickVictims = %v, want %v", got, tc.want)
			}
		})
	}
}

func rev(w *Worker, r string) *Worker { w.revision = r; return w }

// A scale-down takes not-ready replicas first, and never a ready one that
// would take the ready count below min_workers.
func TestServiceVictims(t *testing.T) {
	cases := []struct {
		name  string
		ready []bool // by slot 1..n
		min   int
		n     int
		want  []int
	}{
		{"not ready first", []bool{true, true, false}, 1, 1, []int{3}},
		{"then ready ones above min", []bool{true, true, false}, 1, 2, []int{3, 2}},
		{"ready held back at min", []bool{true, false, false}, 1, 3, []int{3, 2}},
		{"min counts ready replicas", []bool{true, true, true}, 2, 2, []int{3}},
		// Slot 1 runs an old revision (oldRev): a rollout is under way.
		{"a rollout's new replica is kept", []bool{true, false}, 1, 1, nil},
		{"a rollout's old one is not", []bool{true, false, true}, 1, 1, []int{1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testPool("web")
			cfg.MinWorkers = tc.min
			ws := New(Deps{Name: "web", Cfg: cfg})
			s := &service{ws: ws}
			for i, ready := range tc.ready {
				w := &Worker{slot: i + 1, unit: units.UnitName("web", i+1)}
				if strings.HasPrefix(tc.name, "a rollout") && i == 0 {
					w.revision = "oldrev"
				}
				if ready {
					w.rd = repReady
				}
				ws.Slots.Live[i+1] = w
			}
			var got []int
			for _, w := range s.ServiceVictims(tc.n) {
				got = append(got, w.slot)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("victims %v, want %v", got, tc.want)
			}
		})
	}
}
