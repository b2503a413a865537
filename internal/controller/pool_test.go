package controller

import (
	"slices"
	"testing"
)

func TestPickSlots(t *testing.T) {
	tests := []struct {
		name             string
		busy, backingOff []int
		n                int
		want             []int
	}{
		{"empty pool takes the lowest slots", nil, nil, 3, []int{1, 2, 3}},
		{"fills the gaps first", []int{1, 3}, nil, 2, []int{2, 4}},
		{"nothing wanted", []int{1}, nil, 0, nil},
		{"a backing-off slot keeps its place", nil, []int{1}, 1, nil},
		{"and does not block the others", nil, []int{1}, 3, []int{2, 3}},
		{"draining and live slots are skipped", []int{1, 2}, []int{3}, 2, []int{4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := pickSlots(set(tc.busy), set(tc.backingOff), tc.n); !slices.Equal(got, tc.want) {
				t.Errorf("pickSlots = %v, want %v", got, tc.want)
			}
		})
	}
}

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

func set(xs []int) map[int]bool {
	m := map[int]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}
