package controller

import (
	"slices"
	"testing"
)

func TestPickVictims(t *testing.T) {
	w := func(slot int, util float64) *worker { return &worker{slot: slot, util: util} }
	tests := []struct {
		name string
		ws   []*worker
		n    int
		want []int
	}{
		{"least CPU first", []*worker{w(1, 0.9), w(2, 0.1), w(3, 0.5)}, 2, []int{2, 3}},
		{"ties go to the highest slot", []*worker{w(1, 0), w(2, 0), w(3, 0)}, 2, []int{3, 2}},
		{"CPU beats slot order", []*worker{w(1, 0), w(5, 0.7)}, 1, []int{1}},
		{"never more than there are", []*worker{w(1, 0)}, 3, []int{1}},
		{"none", []*worker{w(1, 0)}, 0, nil},
		{"outdated first, then CPU", []*worker{w(1, 0), w(2, 0.9), rev(w(3, 0.8), "old"), rev(w(4, 0), "new")}, 2, []int{3, 4}},
		{"an unknown revision counts as current", []*worker{rev(w(1, 0.5), ""), rev(w(2, 0.1), "new")}, 1, []int{2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			for _, v := range pickVictims(tc.ws, tc.n, "new") {
				got = append(got, v.slot)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("pickVictims = %v, want %v", got, tc.want)
			}
		})
	}
}

func rev(w *worker, r string) *worker { w.revision = r; return w }
