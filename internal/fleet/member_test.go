package fleet

import (
	"slices"
	"testing"
	"time"
)

func TestGoneAfter(t *testing.T) {
	tests := []struct {
		interval, want time.Duration
	}{
		{0, 9 * time.Second},
		{-time.Second, 9 * time.Second},
		{2 * time.Second, 6 * time.Second},
	}
	for _, tt := range tests {
		if got := GoneAfter(tt.interval); got != tt.want {
			t.Errorf("GoneAfter(%s) = %s, want %s", tt.interval, got, tt.want)
		}
	}
}

func TestLiveMembers(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	gone := 9 * time.Second
	tests := []struct {
		name    string
		members []Member
		want    []string
	}{
		{"sorted by id", []Member{{ID: "c", SeenAt: now}, {ID: "a", SeenAt: now}, {ID: "b", SeenAt: now}}, []string{"a", "b", "c"}},
		{"silent past the limit is gone", []Member{{ID: "a", SeenAt: ago(9*time.Second + 1)}, {ID: "b", SeenAt: ago(9 * time.Second)}}, []string{"b"}},
		{"a heartbeat in the store's future is live", []Member{{ID: "a", SeenAt: now.Add(time.Second)}}, []string{"a"}},
		{"no id is dropped", []Member{{ID: "", SeenAt: now}, {ID: "a", SeenAt: now}}, []string{"a"}},
		{"the latest heartbeat of an id wins", []Member{{ID: "a", SeenAt: ago(time.Second)}, {ID: "a", SeenAt: ago(20 * time.Second)}}, []string{"a"}},
		{"an old duplicate does not revive", []Member{{ID: "a", SeenAt: ago(20 * time.Second)}}, nil},
		{"none", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, m := range LiveMembers(tt.members, now, gone) {
				got = append(got, m.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("LiveMembers = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLiveMembersKeepsLatestAndClampsCounts(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	ms := LiveMembers([]Member{
		{ID: "a", Capacity: 3, SeenAt: now.Add(-2 * time.Second)},
		{ID: "a", Capacity: 5, Live: -1, SeenAt: now.Add(-time.Second)},
	}, now, 9*time.Second)
	if len(ms) != 1 || ms[0].Capacity != 5 || ms[0].Live != 0 {
		t.Fatalf("LiveMembers = %+v, want one member a with capacity 5 and live 0", ms)
	}
}

func TestSum(t *testing.T) {
	got := Sum([]Member{
		{ID: "a", Capacity: 4, Live: 3, Starting: 1, Draining: 2},
		{ID: "b", Capacity: 6, Live: 5, Draining: -1},
	})
	want := Totals{Hosts: 2, Capacity: 10, Live: 8, Starting: 1, Draining: 2}
	if got != want {
		t.Errorf("Sum = %+v, want %+v", got, want)
	}
	if hs := Hosts([]Member{{ID: "a", Capacity: 4}}); len(hs) != 1 || hs[0] != (Host{ID: "a", Capacity: 4}) {
		t.Errorf("Hosts = %v", hs)
	}
}
