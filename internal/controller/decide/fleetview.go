package decide

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/fleet/coord"
	"github.com/flexiq/flexiq-scaled/internal/fleet/stores"
)

// View is status's fleet section.
func (f *Fleet) View() *api.FleetView {
	s := f.fl.c.Snapshot()
	v := &api.FleetView{
		Store: stores.Kind(f.fl.store), HostID: f.fl.cfg.HostID,
		Leader: coord.HostOf(s.Lease.Holder), IsLeader: s.Leader, Epoch: s.Lease.Epoch,
		PlanEpoch: s.Plan.Epoch, Target: s.Plan.Target,
		Share: s.Target, Phase: string(s.Apply.Phase),
		Reachable: s.Reachable, CallsPerTick: s.Calls.Sum(),
	}
	if s.Plan.Epoch != 0 {
		age := s.Apply.Age.Seconds()
		v.PlanAgeSec = &age
	}
	switch {
	case s.StoreErr != nil:
		v.Error = s.StoreErr.Error()
	case s.SourceErr != nil:
		v.Error = s.SourceErr.Error()
	}
	members := map[string]fleet.Member{}
	for _, m := range s.Members {
		members[m.ID] = m
	}
	ids := make([]string, 0, len(s.Plan.Shares))
	for id := range s.Plan.Shares {
		ids = append(ids, id)
	}
	for id := range members {
		if _, ok := s.Plan.Shares[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	self := f.fl.member()
	for _, id := range ids {
		h := api.FleetHost{ID: id, Share: s.Plan.Shares[id], Live: -1, Capacity: -1}
		if m, ok := members[id]; ok {
			h.Live, h.Capacity = m.Live, m.Capacity
		} else if id == f.fl.cfg.HostID {
			h.Live, h.Capacity = self.Live, self.Capacity
		}
		v.Hosts = append(v.Hosts, h)
	}
	return v
}

// Members completes a follower's fleet section in v with the
// other hosts' live counts and capacities, as their heartbeats in the
// store say: a follower reads the plan at each tick, which carries the
// shares only, and not the members, which would make every follower's
// traffic grow with the fleet. Asked for by status, it is one store call,
// bounded by ctx, and none when the store did not answer the last tick;
// v's snapshot is not touched (the section is copied). A leader's view, a
// pool outside a fleet, or a failed read (said in MembersError) come back
// as they were.
// Any goroutine.
func (d *Fleet) Members(ctx context.Context, v api.View) api.View {
	fl := d.fl
	if v.Fleet == nil || v.Fleet.IsLeader {
		return v
	}
	f := *v.Fleet
	f.Hosts = slices.Clone(f.Hosts)
	v.Fleet = &f
	if !f.Reachable {
		// Not answering the coordinator: status does not wait on it too.
		f.MembersError = "the other hosts' live counts: the store did not answer the last tick"
		return v
	}
	ms, now, err := fl.store.Members(ctx, fl.pool.Load().Name)
	if err != nil {
		f.MembersError = "the other hosts' live counts: " + err.Error()
		return v
	}
	live := fleet.LiveMembers(ms, now, fleet.GoneAfter(fl.cfg.Heartbeat))
	for _, m := range live {
		i := slices.IndexFunc(f.Hosts, func(h api.FleetHost) bool { return h.ID == m.ID })
		if i < 0 {
			// A member the plan does not name yet (joining).
			f.Hosts = append(f.Hosts, api.FleetHost{ID: m.ID})
			i = len(f.Hosts) - 1
		}
		if m.ID != f.HostID { // this host's own counts are fresher
			f.Hosts[i].Live, f.Hosts[i].Capacity = m.Live, m.Capacity
		}
	}
	slices.SortFunc(f.Hosts, func(a, b api.FleetHost) int { return strings.Compare(a.ID, b.ID) })
	return v
}
