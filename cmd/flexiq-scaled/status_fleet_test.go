package main

import (
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// A fleet pool on a follower, as status shows it: the queue is the
// leader's to read, the source's health is not this host's to judge, and
// the fleet's lease, plan and hosts are listed.
func TestPrintStatusFleetFollower(t *testing.T) {
	now := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	age := 1.2
	v := api.View{
		Pool: "bulk", Mode: "active",
		Workers: api.WorkerCounts{Live: 8, Target: 8, Min: 0, Max: 10},
		Source:  api.SourceView{Type: "bullmq"},
		Fleet: &api.FleetView{
			Store: "redis", HostID: "8a1d0c93e27f4b5a", Leader: "3f9c2a1b0d4e77aa", Epoch: 7,
			PlanEpoch: 7, Target: 20, PlanAgeSec: &age, Share: 8, Phase: "fresh", Reachable: true,
			Hosts: []api.FleetHost{
				{ID: "3f9c2a1b0d4e77aa", Share: 12, Live: -1, Capacity: -1},
				{ID: "8a1d0c93e27f4b5a", Share: 8, Live: 8, Capacity: 10},
			},
		},
	}
	var b strings.Builder
	printStatus(&b, []api.View{v}, now)
	out := b.String()
	for _, want := range []string{
		"● bulk - active\n",
		"     Queue: read by the fleet's leader\n",
		"     Fleet: redis; leader 3f9c2a1b0d4e, epoch 7; this host 8a1d0c93e27f\n",
		"      Plan: fleet target 20, this host's share 8 (fresh); plan epoch 7, 1.2s old\n",
		"      Host: 3f9c2a1b0d4e share 12, live ?, capacity ?\n",
		"      Host: 8a1d0c93e27f share 8, live 8, capacity 10 (this host)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Source:") {
		t.Errorf("a follower's status judges the source it does not read:\n%s", out)
	}
	// The other hosts' counts unread: the reason under the hosts.
	v.Fleet.MembersError = "the other hosts' live counts: context deadline exceeded"
	b.Reset()
	printStatus(&b, []api.View{v}, now)
	if want := "capacity 10 (this host)\n            (the other hosts' live counts: context deadline exceeded)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, b.String())
	}
	// The store gone: the bullet says so.
	v.Fleet.Reachable = false
	b.Reset()
	printStatus(&b, []api.View{v}, now)
	if !strings.HasPrefix(b.String(), "× bulk") || !strings.Contains(b.String(), "redis (not answering)") {
		t.Errorf("an unreachable store:\n%s", b.String())
	}
}
