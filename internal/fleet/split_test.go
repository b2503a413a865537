package fleet

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"
)

func hosts(caps ...int) []Host {
	hs := make([]Host, len(caps))
	for i, c := range caps {
		hs[i] = Host{ID: string(rune('a' + i)), Capacity: c}
	}
	return hs
}

// running sets what each host runs now (Host.Running), in order.
func running(hs []Host, vals ...int) []Host {
	for i, v := range vals {
		hs[i].Running = v
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
		{"input order does not matter", 10, []Host{{ID: "c", Capacity: 10}, {ID: "a", Capacity: 10}, {ID: "b", Capacity: 10}}, shares(4, 3, 3)},
		{"a duplicate id counts once", 4, []Host{{ID: "a", Capacity: 10}, {ID: "a", Capacity: 10}, {ID: "b", Capacity: 10}}, shares(2, 2)},
		{"a duplicate id counts with its first capacity", 5, []Host{{ID: "a", Capacity: 1}, {ID: "b", Capacity: 2}, {ID: "a", Capacity: 5}}, shares(1, 2)},
		{"what a host runs does not matter", 10, running(hosts(20, 10, 10), 0, 9, 9), shares(5, 3, 2)},
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
		// Issue 27, item 4: a, running 5 of 8/8/4 at a target of 12 (split
		// 5/5/2), was cut off; the others took its share (b 8, c 4); the
		// link is back and a still runs its 5. The others shed, not a.
		{"a rejoining host keeps what it runs", 12, running(hosts(8, 8, 4), 5, 8, 4), map[string]int{"b": 8, "c": 4}, shares(5, 5, 2)},
		{"a rejoining host named with 0 keeps what it runs", 12, running(hosts(8, 8, 4), 5, 8, 4), shares(0, 8, 4), shares(5, 5, 2)},
		// The same fleet, the leader paused while the others took its 5:
		// the plan it finds names it with nothing, it runs 5.
		{"a resumed leader keeps what it runs", 12, running(hosts(8, 8, 4), 8, 5, 4), shares(8, 0, 4), shares(5, 5, 2)},
		{"a rejoining host above its share sheds down to it", 12, running(hosts(8, 8, 4), 7, 8, 4), map[string]int{"b": 8, "c": 4}, shares(5, 5, 2)},
		{"a rejoining host below its share takes nothing back", 12, running(hosts(8, 8, 4), 2, 8, 4), map[string]int{"b": 8, "c": 4}, shares(2, 7, 3)},
		{"a rejoining host's workers capped at its capacity", 12, running(hosts(3, 8, 4), 5, 8, 4), map[string]int{"b": 8, "c": 4}, shares(3, 6, 3)},
		{"a rejoining host with the target grown meanwhile", 15, running(hosts(8, 8, 4), 5, 8, 4), map[string]int{"b": 8, "c": 4}, shares(5, 7, 3)},
		{"a host still starting its share keeps it", 12, running(hosts(8, 8, 4), 1, 5, 2), shares(5, 5, 2), shares(5, 5, 2)},
		{"a host still draining what the last plan took sheds it again", 12, running(hosts(8, 8, 4), 5, 8, 4), shares(5, 5, 2), shares(5, 5, 2)},
		{"a joining host that runs workers is counted", 10, running(hosts(10, 10, 10), 5, 5, 4), shares(5, 5), shares(4, 3, 3)},
		{"a negative running count reads as none", 10, running(hosts(10, 10), -4, 0), shares(5, 5), shares(5, 5)},
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
		for i, h := range hs {
			if rng.Intn(4) > 0 {
				prev[h.ID] = rng.Intn(35)
			}
			if rng.Intn(3) == 0 {
				hs[i].Running = rng.Intn(35)
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
			kept[h.ID] = min(max(prev[h.ID], h.Running, 0), h.Capacity)
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
		// Stable: the same target over the same hosts, once they run
		// their shares, moves nothing.
		applied := slices.Clone(hs)
		for i := range applied {
			applied[i].Running = got[applied[i].ID]
		}
		if again := Split(target, applied, got); !maps.Equal(again, got) {
			t.Fatalf("%s: again %v", desc, again)
		}
		// No flapping while the hosts move: each runs anything between
		// what it held and its new share (starting, or draining), and
		// the next tick's split is the same.
		moving := slices.Clone(hs)
		for i := range moving {
			lo, hi := min(kept[moving[i].ID], got[moving[i].ID]), max(kept[moving[i].ID], got[moving[i].ID])
			moving[i].Running = lo + rng.Intn(hi-lo+1)
		}
		if again := Split(target, moving, got); !maps.Equal(again, got) {
			t.Fatalf("%s: with the hosts on their way (%v) %v", desc, moving, again)
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
