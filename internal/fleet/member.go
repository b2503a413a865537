package fleet

import (
	"cmp"
	"slices"
	"time"
)

// Membership (issue 20, "Membership"): every host heartbeats every
// interval; a host silent for GoneBeats intervals is gone. Ages are
// measured on the store's clock only (Member.SeenAt against the now that
// Store.Members returns), so that hosts whose clocks disagree still agree
// on who is live.

// DefaultHeartbeat is the heartbeat interval when the configuration gives
// none: a few seconds, well inside the lease's TTL (about 15 s), so that a
// host's loss is noticed before the lease of a lost leader expires.
const DefaultHeartbeat = 3 * time.Second

// GoneBeats is how many heartbeat intervals a host may miss before it is
// gone: one missed beat is a slow link, three is a lost host.
const GoneBeats = 3

// GoneAfter is the silence after which a host is gone, for a heartbeat
// interval (DefaultHeartbeat when interval <= 0).
func GoneAfter(interval time.Duration) time.Duration {
	if interval <= 0 {
		interval = DefaultHeartbeat
	}
	return GoneBeats * interval
}

// LiveMembers returns the members heard from within goneAfter of now (both
// on the store's clock), one per host id (the latest heartbeat wins), in
// order of host id, so that every caller sees the same list whatever order
// the store returned. A member with no id is dropped; a negative capacity
// or count reads as 0. A heartbeat a little in the store's future (a
// replica's clock) counts as live.
func LiveMembers(members []Member, now time.Time, goneAfter time.Duration) []Member {
	latest := make(map[string]Member, len(members))
	for _, m := range members {
		if m.ID == "" {
			continue
		}
		if prev, ok := latest[m.ID]; ok && !m.SeenAt.After(prev.SeenAt) {
			continue
		}
		latest[m.ID] = m
	}
	out := make([]Member, 0, len(latest))
	for _, m := range latest {
		if now.Sub(m.SeenAt) > goneAfter {
			continue
		}
		m.Capacity, m.Live = max(m.Capacity, 0), max(m.Live, 0)
		m.Starting, m.Draining = max(m.Starting, 0), max(m.Draining, 0)
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Totals is the fleet seen as one pool: the sums over its live members.
type Totals struct {
	Hosts    int
	Capacity int
	// Live is what policy.Observation.Current means on one host: the
	// workers active or activating, not draining. Member.Live must count
	// the same way (the controller's workers.live()); Starting is the
	// part of it still activating, kept for status.
	Live     int
	Starting int
	Draining int
}

// Sum adds up members (normally LiveMembers' result).
func Sum(members []Member) Totals {
	t := Totals{Hosts: len(members)}
	for _, m := range members {
		t.Capacity += max(m.Capacity, 0)
		t.Live += max(m.Live, 0)
		t.Starting += max(m.Starting, 0)
		t.Draining += max(m.Draining, 0)
	}
	return t
}

// Hosts turns members into the split's input, each with what it runs.
func Hosts(members []Member) []Host {
	out := make([]Host, len(members))
	for i, m := range members {
		out[i] = Host{ID: m.ID, Capacity: m.Capacity, Running: m.Live}
	}
	return out
}
