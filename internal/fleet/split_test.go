package fleet

import (
	"fmt"
	"maps"
	"math/rand"
	"testing"
)

func hosts(caps ...int) []Host {
	hs := make([]Host, len(caps))
	for i, c := range caps {
		hs[i] = Host{ID: string(rune('a' + i)), Capacity: c}
	}
	return hs
}

func shares(vals ...int) map[string]int {
	m := make(map[string]int, len(vals))
	for i, v := range vals {
		m[string(rune('a'+i))] = v
	}
	return m
}

func TestProportional(t *testing.T) {
	tests := []struct {
		name   string
		target int
		hosts  []Host
		want   map[string]int
	}{
		{"even", 9, hosts(10, 10, 10), shares(3, 3, 3)},
		{"remainder to the lowest id on a tie", 10, hosts(10, 10, 10), shares(4, 3, 3)},
		{"two left over", 11, hosts(10, 10, 10), shares(4, 4, 3)},
		{"by capacity", 10, hosts(20, 10, 10), shares(5, 3, 2)},
		{"largest remainder wins over id", 5, hosts(1, 1, 4), shares(1, 1, 3)},
		{"capped at capacity", 100, hosts(4, 10, 6), shares(4, 10, 6)},
		{"exactly the capacity", 20, hosts(4, 10, 6), shares(4, 10, 6)},
		{"zero target", 0, hosts(4, 10), shares(0, 0)},
		{"negative target", -3, hosts(4, 10), shares(0, 0)},
		{"a host with no capacity", 5, hosts(0, 10), shares(0, 5)},
		{"no capacity at all", 5, hosts(0, 0), shares(0, 0)},
		{"no hosts", 5, nil, map[string]int{}},
		{"input order does not matter", 10, []Host{{"c", 10}, {"a", 10}, {"b", 10}}, shares(4, 3, 3)},
		{"a duplicate id counts once", 4, []Host{{"a", 10}, {"a", 10}, {"b", 10}}, shares(2, 2)},
		{"a duplicate id counts with its first capacity", 5, []Host{{"a", 1}, {"b", 2}, {"a", 5}}, shares(1, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Proportional(tt.target, tt.hosts); !maps.Equal(got, tt.want) {
				t.Errorf("Proportional(%d, %v) = %v, want %v", tt.target, tt.hosts, got, tt.want)
			}
		})
	}
}

func TestSplitSticky(t *testing.T) {
	tests := []struct {
		name   string
		target int
		hosts  []Host
		prev   map[string]int
		want   map[string]int
	}{
		{"first plan is the proportional one", 10, hosts(10, 10, 10), nil, shares(4, 3, 3)},
		{"nothing changes, nothing moves", 10, hosts(10, 10, 10), shares(2, 5, 3), shares(2, 5, 3)},
		{"growth goes to the host furthest below its share", 11, hosts(10, 10, 10), shares(2, 5, 3), shares(3, 5, 3)},
		{"growth fills the deficits by level", 15, hosts(10, 10, 10), shares(0, 9, 1), shares(3, 9, 3)},
		{"growth ties go to the lower id", 12, hosts(10, 10, 10), shares(3, 3, 3), shares(4, 4, 4)},
		{"growth by one on a tie", 10, hosts(10, 10, 10), shares(3, 3, 3), shares(4, 3, 3)},
		{"shrink sheds from the host furthest above its share", 9, hosts(10, 10, 10), shares(2, 5, 3), shares(2, 4, 3)},
		{"shrink by level", 6, hosts(10, 10, 10), shares(1, 8, 3), shares(1, 3, 2)},
		{"shrink ties: the higher id sheds", 8, hosts(10, 10, 10), shares(3, 3, 3), shares(3, 3, 2)},
		{"shrink to zero", 0, hosts(10, 10), shares(4, 6), shares(0, 0)},
		{"a gone host's share goes to the others", 9, hosts(10, 10), map[string]int{"a": 3, "b": 3, "z": 3}, shares(5, 4)},
		{"a gone host's share capped by the others' capacity", 20, hosts(4, 10), map[string]int{"a": 3, "b": 3, "z": 14}, shares(4, 10)},
		{"the fleet short of capacity", 30, hosts(4, 6), map[string]int{"a": 3, "z": 9}, shares(4, 6)},
		{"a host whose capacity fell keeps what fits", 10, hosts(2, 10), shares(5, 5), shares(2, 8)},
		{"a joining host waits for growth", 10, hosts(10, 10, 10), shares(5, 5), shares(5, 5, 0)},
		{"a joining host gets the growth", 13, hosts(10, 10, 10), shares(5, 5), shares(5, 5, 3)},
		{"negative previous shares read as none", 4, hosts(10, 10), shares(-5, 2), shares(2, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Split(tt.target, tt.hosts, tt.prev); !maps.Equal(got, tt.want) {
				t.Errorf("Split(%d, %v, %v) = %v, want %v", tt.target, tt.hosts, tt.prev, got, tt.want)
			}
		})
	}
}

// TestSplitProperties checks the split's promises on random fleets, with a
// fixed seed so that a failure reproduces.
func TestSplitProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(20))
	for run := 0; run < 3000; run++ {
		n := 1 + rng.Intn(8)
		hs := make([]Host, n)
		total := 0
		for i := range hs {
			hs[i] = Host{ID: fmt.Sprintf("h%02d", rng.Intn(40)), Capacity: rng.Intn(30)}
		}
		hs, total = sortedHosts(hs)
		prev := map[string]int{}
		for _, h := range hs {
			if rng.Intn(4) > 0 {
				prev[h.ID] = rng.Intn(35)
			}
		}
		if rng.Intn(3) == 0 {
			prev["gone"] = rng.Intn(10)
		}
		target := rng.Intn(total + 20)
		got := Split(target, hs, prev)
		desc := fmt.Sprintf("run %d: Split(%d, %v, %v) = %v", run, target, hs, prev, got)
		want := min(target, total)
		sum, kept := 0, map[string]int{}
		for _, h := range hs {
			sum += got[h.ID]
			if got[h.ID] < 0 || got[h.ID] > h.Capacity {
				t.Fatalf("%s: host %s gets %d of capacity %d", desc, h.ID, got[h.ID], h.Capacity)
			}
			kept[h.ID] = min(max(prev[h.ID], 0), h.Capacity)
		}
		if sum != want || len(got) != len(hs) {
			t.Fatalf("%s: sums to %d over %d hosts, want %d over %d", desc, sum, len(got), want, len(hs))
		}
		k := 0
		for _, v := range kept {
			k += v
		}
		// The least any split can move is |T' − K|; the proportional
		// split can only move more.
		if m := Moved(kept, got); m != abs(want-k) || m > Moved(kept, Proportional(target, hs)) {
			t.Fatalf("%s: moves %d, want %d (proportional moves %d)", desc, m, abs(want-k), Moved(kept, Proportional(target, hs)))
		}
		// Stable: the same target over the same hosts moves nothing.
		if again := Split(target, hs, got); !maps.Equal(again, got) {
			t.Fatalf("%s: again %v", desc, again)
		}
		// Deterministic whatever the hosts' order.
		rev := make([]Host, len(hs))
		for i, h := range hs {
			rev[len(hs)-1-i] = h
		}
		if other := Split(target, rev, prev); !maps.Equal(other, got) {
			t.Fatalf("%s: reversed hosts give %v", desc, other)
		}
	}
}

func TestMoved(t *testing.T) {
	tests := []struct {
		prev, next map[string]int
		want       int
	}{
		{shares(1, 2), shares(1, 2), 0},
		{shares(1, 2), shares(2, 1), 2},
		{map[string]int{"z": 3}, shares(3), 6},
		{nil, shares(3, 4), 7},
	}
	for _, tt := range tests {
		if got := Moved(tt.prev, tt.next); got != tt.want {
			t.Errorf("Moved(%v, %v) = %d, want %d", tt.prev, tt.next, got, tt.want)
		}
	}
}

func BenchmarkSplit100(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	hs := make([]Host, 100)
	prev := map[string]int{}
	for i := range hs {
		hs[i] = Host{ID: fmt.Sprintf("host%03d", i), Capacity: 10 + rng.Intn(40)}
		prev[hs[i].ID] = rng.Intn(10)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Split(1000+i%500, hs, prev)
	}
}
