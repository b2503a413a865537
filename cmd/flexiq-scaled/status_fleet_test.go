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

// TestPrintStatusHostileStore (issue 27, item 6): host ids and errors read
// from the fleet's store, which any writer of it can set, reach the
// terminal quoted and escaped: an id with an OSC sequence retitles no
// terminal, and no line is forged.
func TestPrintStatusHostileStore(t *testing.T) {
	const evil = "\x1b]0;pwned\a"
	v := api.View{
		Pool: "bulk", Mode: "active",
		Workers: api.WorkerCounts{Live: 1, Target: 1, Max: 4},
		Source:  api.SourceView{Type: "bullmq", LastError: "bad reply " + evil, LastErrorAt: time.Now()},
		Fleet: &api.FleetView{
			Store: "redis", HostID: "8a1d0c93e27f4b5a", Leader: evil, Epoch: 7, Reachable: true,
			Error:        "store: member " + evil,
			Hosts:        []api.FleetHost{{ID: evil, Share: 1, Live: 1, Capacity: 1}, {ID: "8a1d0c93e27f4b5a", Share: 1, Live: 1, Capacity: 4}},
			MembersError: "decoding " + evil,
		},
		LastDecision: &api.Explanation{Time: time.Now(), Action: "hold", Rationale: "leader " + evil},
		WorkerList:   []api.WorkerView{{Slot: 1, Unit: "flexiq-bulk@1.service", State: "active"}},
	}
	var b strings.Builder
	printStatus(&b, []api.View{v}, time.Now())
	out := b.String()
	if i := strings.IndexFunc(out, func(r rune) bool { return r < 0x20 && r != '\n' || r == 0x7f }); i >= 0 {
		t.Errorf("status prints a control character %q at %d:\n%q", out[i], i, out)
	}
	for _, want := range []string{`leader "\x1b]0;pwned\a", epoch 7`, `Host: "\x1b]0;pwned\a" share 1`, "Host: 8a1d0c93e27f share 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}
