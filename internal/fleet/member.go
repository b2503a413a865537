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

// MaxCount bounds every count a heartbeat carries (capacity, live,
// starting, draining): no host runs a hundred thousand workers of one
// pool, and the fleet's sums of counts so bounded cannot overflow. A
// member's entry is anyone's to write who can write the store (issue 27):
// MaxInt64 workers must not wrap the fleet's total into another target.
const MaxCount = 100_000

// clampCount is n within [0, MaxCount].
func clampCount(n int) int { return min(max(n, 0), MaxCount) }

// LiveMembers returns the members heard from within goneAfter of now (both
// on the store's clock), one per host id (the latest heartbeat wins), in
// order of host id, so that every caller sees the same list whatever order
// the store returned. A member with no id, or one the store could not
// read (Invalid), is dropped; every count is clamped to [0, MaxCount]. A
// heartbeat a little in the store's future (a replica's clock) counts as
// live; one further ahead should have gone through Sightings.Judge first,
// or it is live for as long as its time lies ahead.
func LiveMembers(members []Member, now time.Time, goneAfter time.Duration) []Member {
	latest := make(map[string]Member, len(members))
	for _, m := range members {
		if m.ID == "" || m.Invalid != "" {
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
		m.Capacity, m.Live = clampCount(m.Capacity), clampCount(m.Live)
		m.Starting, m.Draining = clampCount(m.Starting), clampCount(m.Draining)
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
	// the same way (the controller's workers.Live()); Starting is the
	// part of it still activating, kept for status.
	Live     int
	Starting int
	Draining int
}

// Sum adds up members (normally LiveMembers' result).
func Sum(members []Member) Totals {
	t := Totals{Hosts: len(members)}
	for _, m := range members {
		t.Capacity += clampCount(m.Capacity)
		t.Live += clampCount(m.Live)
		t.Starting += clampCount(m.Starting)
		t.Draining += clampCount(m.Draining)
	}
	return t
}

// Hosts turns members into the split's input, each with what it runs.
func Hosts(members []Member) []Host {
	out := make([]Host, len(members))
	for i, m := range members {
		out[i] = Host{ID: m.ID, Capacity: clampCount(m.Capacity), Running: clampCount(m.Live)}
	}
	return out
}

// Sightings judge heartbeats dated in the store's future (issue 27): a
// SeenAt more than FutureSlack ahead of the store's clock is a hostile
// write, or a store whose clock stepped back since, and would keep a dead
// host live for as long as it lies ahead. Such a heartbeat counts as seen
// when this host first read it (on the store's clock): a live host writes
// a new one every tick, so it stays live, a dead one is gone GoneBeats
// heartbeats later. The zero value is ready; not safe for concurrent use.
type Sightings struct {
	first map[string]sighting
}

type sighting struct{ seen, at time.Time }

// Judge returns members with every future SeenAt replaced by when it was
// first read (now, the store's clock, the first time). members is not
// modified. What it remembers is only the members read now.
func (s *Sightings) Judge(members []Member, now time.Time) []Member {
	out := slices.Clone(members)
	next := make(map[string]sighting)
	for i, m := range out {
		if !m.SeenAt.After(now.Add(FutureSlack)) {
			continue
		}
		sg, ok := s.first[m.ID]
		if !ok || !sg.seen.Equal(m.SeenAt) || sg.at.After(now) {
			sg = sighting{seen: m.SeenAt, at: now}
		}
		next[m.ID] = sg
		out[i].SeenAt = sg.at
	}
	s.first = next
	return out
}
