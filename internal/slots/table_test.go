package slots

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

func set(xs []int) map[int]bool {
	m := map[int]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}
