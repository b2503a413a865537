package fleet

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	fleetmode "github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/test/harness"
)

// A host that comes back (its link healed, or a paused leader resumed)
// after the others took its share keeps its workers (issue 27, item 4):
// the leader counts what it runs and the split sheds from the hosts
// furthest above their proportional share, the ones that took over.

// invocations are the pool's active worker units on h with their
// InvocationID: a worker stopped and started again has a new one.
func invocations(t *testing.T, h *host, pool string) map[string]string {
	t.Helper()
	out, err := harness.Exec(h.sb, 30*time.Second, "sh", "-c",
		`for u in $(systemctl list-units --state=active --plain --no-legend 'flexiq-`+pool+`@*.service' | awk '{print $1}'); do
echo "$u $(systemctl show -p InvocationID --value "$u")"; done`)
	if err != nil {
		t.Fatalf("%s: listing %s's workers: %v\n%s", h.name, pool, err, out)
	}
	ids := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if u, id, ok := strings.Cut(l, " "); ok && id != "" {
			ids[u] = id
		}
	}
	return ids
}

// rejoinSnapshot is what a host that is away runs, taken before it is back.
type rejoinSnapshot struct {
	h     *host
	ids   map[string]map[string]string // pool -> unit -> InvocationID
	units map[string]map[string]int    // pool -> host name -> units, at the return
}

func (c *cluster) beforeRejoin(t *testing.T, h *host) rejoinSnapshot {
	t.Helper()
	s := rejoinSnapshot{h: h, ids: map[string]map[string]string{}, units: map[string]map[string]int{}}
	rd, _ := c.rec.last(pools[0].name)
	for _, p := range pools {
		s.ids[p.name] = invocations(t, h, p.name)
		s.units[p.name] = map[string]int{}
		for _, o := range c.live() {
			s.units[p.name][o.name] = rd.Hosts[o.name][p.name].Units
		}
	}
	return s
}

// afterRejoin checks, once the fleet is steady again, that the host kept
// the workers it ran while away (same units, same InvocationIDs) up to its
// proportional share, and that its share is no less, and records the
// figures. The split is the proportional one when every host held at
// least its proportional share at the return (the earlier scenarios can
// leave a sticky split that is not: then it stays as sticky as it was).
func (c *cluster) afterRejoin(t *testing.T, s rejoinSnapshot, scenario string) {
	t.Helper()
	want := expectedTarget(burstJobs)
	rd, _ := c.rec.last(pools[0].name)
	var hosts []fleetmode.Host
	for _, o := range c.live() {
		hosts = append(hosts, fleetmode.Host{ID: o.id, Capacity: o.capacity})
	}
	ideal := fleetmode.Proportional(want, hosts)
	for _, p := range pools {
		_, st := c.rec.last(p.name)
		ran := len(s.ids[p.name])
		keep := min(ran, ideal[s.h.id])
		if st.Shares[s.h.id] < keep {
			t.Errorf("%s after %s: %s, back with %d workers, has a share of %d (split %s), want at least %d (its proportional share %d)",
				p.name, scenario, s.h.name, ran, st.Shares[s.h.id], c.sharesByName(st.Shares), keep, ideal[s.h.id])
		}
		now := invocations(t, s.h, p.name)
		lost := 0
		for u, id := range s.ids[p.name] {
			if now[u] != id {
				lost++
			}
		}
		if lost > ran-keep {
			t.Errorf("%s on %s, back after %s: %d of the %d workers it ran were stopped or replaced, want at most %d (above its proportional share %d)",
				p.name, s.h.name, scenario, lost, ran, ran-keep, ideal[s.h.id])
		}
		stopped := 0
		var moved []string
		for _, o := range c.live() {
			after := rd.Hosts[o.name][p.name].Units
			if o != s.h {
				stopped += max(s.units[p.name][o.name]-after, 0)
			}
			moved = append(moved, fmt.Sprintf("%s:%d->%d", o.name, s.units[p.name][o.name], after))
		}
		c.figure(t, p.name, "rejoin_"+scenario, "host", s.h.name, "split_after", c.sharesByName(st.Shares),
			"proportional", maps.Equal(st.Shares, ideal), "units", strings.Join(moved, ","),
			"stopped_on_others", stopped, "stopped_on_rejoined", lost, "its_workers", ran)
	}
}
