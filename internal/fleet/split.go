package fleet

import (
	"cmp"
	"math"
	"slices"
)

// The split (issue 20, "The leader decides once"): the fleet's target T is
// divided across the live hosts in proportion to their capacity, capped at
// each host's capacity, and sticky.
//
// Proportional, the ideal split P, is Hamilton's largest-remainder method:
// with C the total capacity and T' = min(T, C), host i's quota is
// T'·cap_i/C; each host gets the floor of its quota, and the workers left
// over (fewer than the hosts) go one each to the largest remainders, ties
// to the lower host id. Since the weights are the capacities themselves,
// a quota never exceeds its capacity while T' < C (quota_i = cap_i·T'/C <
// cap_i, so floor+1 <= cap_i), and at T' = C every host is full: the cap
// never binds inside the method, and what a full host cannot take has
// already gone to the others in proportion.
//
// Split, the sticky split, starts from what each host holds: the larger of
// its previous share and what it runs now (its heartbeat's live count),
// clamped to its capacity now (a gone host's share is dropped, a host whose
// capacity fell keeps only what fits): K = Σ kept. Counting what a host
// runs is what keeps a host that comes back from being emptied: cut off or
// paused past the gone time, it left the plan and the others took its
// share, yet it held its workers all along; back, it is counted with them,
// K exceeds T', and the shrink below sheds from whoever is furthest above
// the proportional share, most often the hosts that took over, rather
// than from the workers of the host that returned. The larger of the two,
// not the live count alone, so that a host still starting the workers of
// its share (live below it) keeps its share, and a host draining what the
// last plan took away (live above it, for a tick) sheds the same workers
// again: the shrink of anything between a split and the shares it came
// from is that split. Then:
//   - T' = K: the kept shares, unchanged (no worker moves while the target
//     and the membership stay put, nor on a membership change that leaves
//     the sum alone: a joining host waits for the next growth).
//   - T' > K (growth, or a gone host's share to re-place): only hosts below
//     their ideal share grow, the furthest below first. With a water level
//     L, host i gets max(kept_i, P_i − L), L the least level at which the
//     sum is at most T'; the few workers still to place go one each to the
//     hosts on the water line (P_i − L >= kept_i), in order of host id.
//   - T' < K (shrinking): only hosts above their ideal share shed, the
//     furthest above first: host i keeps min(kept_i, P_i + L), L the
//     greatest level at which the sum is at most T'; the few workers still
//     to place stay, one each, with the hosts on the water line (kept_i >=
//     P_i + L + 1), in order of host id.
//
// Every share then moves one way only, so the workers moved, Σ|s_i −
// kept_i|, are |T' − K|: the least any split summing to T' can move. No
// share exceeds max(kept_i, P_i) <= cap_i. The levels are found by binary
// search: O(n log T) for n hosts, no loop per worker.

// Host is one live host as the split sees it.
type Host struct {
	ID       string
	Capacity int
	// Running is what the host runs now (Member.Live): the split keeps
	// at least that much of it, up to its capacity. Proportional ignores it.
	Running int
}

// maxCount bounds every count, as in the policy: products of two counts
// stay within int64.
const maxCount = math.MaxInt32

func bound(n int) int { return min(max(n, 0), maxCount) }

// sortedHosts is hosts in order of id with their capacities bounded, and
// the total capacity.
func sortedHosts(hosts []Host) ([]Host, int) {
	hs := slices.Clone(hosts)
	// Stable, so that of an id given twice the first counts.
	slices.SortStableFunc(hs, func(a, b Host) int { return cmp.Compare(a.ID, b.ID) })
	hs = slices.CompactFunc(hs, func(a, b Host) bool { return a.ID == b.ID })
	total := 0
	for i := range hs {
		hs[i].Capacity = bound(hs[i].Capacity)
		total += hs[i].Capacity
	}
	return hs, total
}

// Proportional is the ideal split of target over hosts (see above): the
// largest-remainder method in proportion to capacity, summing to
// min(target, total capacity). A host id given twice counts once, with
// its first capacity.
func Proportional(target int, hosts []Host) map[string]int {
	hs, total := sortedHosts(hosts)
	return proportional(min(bound(target), total), hs, total)
}

// proportional is Proportional over sorted, bounded hosts, for t <= total.
func proportional(t int, hs []Host, total int) map[string]int {
	out := make(map[string]int, len(hs))
	if total == 0 {
		for _, h := range hs {
			out[h.ID] = 0
		}
		return out
	}
	type rem struct {
		id string
		r  int64
	}
	rems := make([]rem, 0, len(hs))
	left := t
	for _, h := range hs {
		num := int64(t) * int64(h.Capacity)
		q := int(num / int64(total))
		out[h.ID] = q
		left -= q
		rems = append(rems, rem{h.ID, num % int64(total)})
	}
	// A stable sort keeps the id order among equal remainders.
	slices.SortStableFunc(rems, func(a, b rem) int { return cmp.Compare(b.r, a.r) })
	for i := 0; i < left; i++ {
		out[rems[i].id]++
	}
	return out
}

// Split is the sticky split of target over hosts given the previous shares
// prev (nil: none, which gives Proportional when no host runs anything). It
// sums to min(target, total capacity), gives no host more than its
// capacity, and moves as few workers as possible from what the hosts hold,
// max(prev, Running) each (see above). The result has an entry for every
// host, zero included.
func Split(target int, hosts []Host, prev map[string]int) map[string]int {
	hs, total := sortedHosts(hosts)
	t := min(bound(target), total)
	ideal := proportional(t, hs, total)
	kept := make([]int, len(hs))
	ps := make([]int, len(hs))
	k := 0
	for i, h := range hs {
		kept[i] = min(max(bound(prev[h.ID]), bound(h.Running)), h.Capacity)
		ps[i] = ideal[h.ID]
		k += kept[i]
	}
	var s []int
	switch {
	case t > k:
		s = grow(t, kept, ps)
	case t < k:
		s = shrink(t, kept, ps)
	default:
		s = kept
	}
	out := make(map[string]int, len(hs))
	for i, h := range hs {
		out[h.ID] = s[i]
	}
	return out
}

// grow raises kept (Σ kept < t) to sum t by the water level:
// max(kept_i, ideal_i − L). Σ ideal = t.
func grow(t int, kept, ideal []int) []int {
	at := func(l int) (sum int) {
		for i := range kept {
			sum += max(kept[i], ideal[i]-l)
		}
		return sum
	}
	// at(0) >= Σ ideal = t, at(max ideal) = Σ kept < t, and at falls as
	// the level rises: find the least level with at(l) <= t.
	lo, hi := 0, slices.Max(ideal)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if at(mid) <= t {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	s := make([]int, len(kept))
	left := t
	for i := range kept {
		s[i] = max(kept[i], ideal[i]-lo)
		left -= s[i]
	}
	for i := 0; i < len(s) && left > 0; i++ {
		if ideal[i]-lo >= kept[i] {
			s[i]++
			left--
		}
	}
	return s
}

// shrink lowers kept (Σ kept > t) to sum t by the water level:
// min(kept_i, ideal_i + L). Σ ideal = t.
func shrink(t int, kept, ideal []int) []int {
	at := func(l int) (sum int) {
		for i := range kept {
			sum += min(kept[i], ideal[i]+l)
		}
		return sum
	}
	// at(0) <= Σ ideal = t, at(max kept) = Σ kept > t, and at rises with
	// the level: find the greatest level with at(l) <= t.
	lo, hi := 0, slices.Max(kept)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if at(mid) <= t {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	s := make([]int, len(kept))
	left := t
	for i := range kept {
		s[i] = min(kept[i], ideal[i]+lo)
		left -= s[i]
	}
	for i := 0; i < len(s) && left > 0; i++ {
		if kept[i] >= ideal[i]+lo+1 {
			s[i]++
			left--
		}
	}
	return s
}

// Moved is the workers a change of shares from prev to next starts or
// stops: Σ|next_i − prev_i| over every host in either map (a host missing
// from one counts 0 there).
func Moved(prev, next map[string]int) int {
	n := 0
	for id, v := range next {
		n += abs(v - prev[id])
	}
	for id, v := range prev {
		if _, ok := next[id]; !ok {
			n += abs(v)
		}
	}
	return n
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
