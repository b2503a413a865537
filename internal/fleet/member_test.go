package fleet

import (
	"math"
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

// Counts a store writer may put in a heartbeat (issue 27): MaxInt64
// workers must not wrap the fleet's sums, nor a bad entry count.
func TestMemberCountsClamped(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	members := []Member{
		{ID: "a", Capacity: 10, Live: 10, SeenAt: now},
		{ID: "b", Capacity: 10, Live: 10, SeenAt: now},
		{ID: "evil", Capacity: math.MaxInt64, Live: math.MaxInt64, Starting: math.MaxInt64, Draining: math.MaxInt64, SeenAt: now},
		{ID: "bad", Capacity: 10, Live: 10, SeenAt: now, Invalid: "encoding version 2"},
	}
	live := LiveMembers(members, now, 9*time.Second)
	if len(live) != 3 {
		t.Fatalf("live %+v, want a, b and evil (bad skipped)", live)
	}
	tot := Sum(live)
	if tot.Live != 20+MaxCount || tot.Capacity != 20+MaxCount || tot.Draining != MaxCount || tot.Starting != MaxCount {
		t.Errorf("totals %+v: want the counts clamped at %d", tot, MaxCount)
	}
	// Sum alone (on members not through LiveMembers) clamps too.
	if tot := Sum(members[:3]); tot.Live < 0 || tot.Live != 20+MaxCount {
		t.Errorf("Sum of unclamped members: live %d, want %d", tot.Live, 20+MaxCount)
	}
}

// A heartbeat dated in the store's future counts from when it was first
// read: the member goes after GoneBeats heartbeats like any silent one,
// while a live host's new heartbeats keep it.
func TestSightingsJudgeFutureHeartbeat(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const beat = 3 * time.Second
	var s Sightings
	ghost := Member{ID: "ghost", Capacity: 5, SeenAt: t0.Add(24 * time.Hour)}
	for i := 0; i <= 5; i++ {
		now := t0.Add(time.Duration(i) * beat)
		alive := Member{ID: "alive", Capacity: 5, SeenAt: now.Add(-time.Second)}
		near := Member{ID: "near", Capacity: 5, SeenAt: now.Add(FutureSlack / 2)}
		judged := s.Judge([]Member{ghost, alive, near}, now)
		if judged[0].SeenAt != t0 {
			t.Fatalf("tick %d: the ghost judged as seen at %s, want its first read %s", i, judged[0].SeenAt, t0)
		}
		live := LiveMembers(judged, now, GoneAfter(beat))
		ids := []string{}
		for _, m := range live {
			ids = append(ids, m.ID)
		}
		wantGhost := time.Duration(i)*beat <= GoneAfter(beat)
		if got := slices.Contains(ids, "ghost"); got != wantGhost || !slices.Contains(ids, "alive") || !slices.Contains(ids, "near") {
			t.Errorf("tick %d: live %v, want ghost %t, alive and near", i, ids, wantGhost)
		}
	}
	// The writer writes a new future time: it counts from its own first read.
	ghost.SeenAt = ghost.SeenAt.Add(time.Hour)
	now := t0.Add(10 * beat)
	if judged := s.Judge([]Member{ghost}, now); judged[0].SeenAt != now {
		t.Errorf("a new future time judged as %s, want %s", judged[0].SeenAt, now)
	}
}
