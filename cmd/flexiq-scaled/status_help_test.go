package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// everySection is a view with every section printStatus prints: a
// degraded, paused gang service pool in a fleet, with a source error, a
// decision and a worker.
func everySection(now time.Time) api.View {
	ready, notReady, age, up := 1, 1, 1.5, 10.0
	return api.View{
		Pool: "web", Mode: "paused", Override: &api.Override{Kind: api.OverridePaused},
		Workers:  api.WorkerCounts{Live: 2, Target: 2, Min: 1, Max: 4, Ready: &ready, NotReady: &notReady, GroupSize: 2},
		Queue:    &api.QueueView{Pending: 1, OldestAgeSec: &age},
		Source:   api.SourceView{Type: "redis", Healthy: false, LastSuccess: now, LastError: "refused", LastErrorAt: now},
		Degraded: &api.Degraded{Since: now, Reason: "slot 2 failed"},
		Fleet: &api.FleetView{Store: "redis", HostID: "a", Leader: "a", IsLeader: true, Epoch: 3, PlanEpoch: 3, PlanAgeSec: &age,
			Target: 4, Share: 2, Phase: "fresh", Reachable: true, Error: "timeout",
			Hosts: []api.FleetHost{{ID: "a", Share: 2, Live: 2, Capacity: 4}}, MembersError: "unread"},
		LastDecision: &api.Explanation{Time: now, Action: "hold", Rationale: "paused", HeldBy: "override"},
		WorkerList:   []api.WorkerView{{Slot: 1, Unit: "flexiq-web@1.service", State: "active", Readiness: "ready", UptimeSec: &up}},
	}
}

// TestStatusHelpDescribesOutput (issue 27, item 7): status --help names
// every section and column that status prints, so a section added to the
// printer without a word in the help fails here; and it says what an
// operator of services and fleets reads there.
func TestStatusHelpDescribesOutput(t *testing.T) {
	r := invoke(t, "status", "--help")
	if r.code != exitOK {
		t.Fatalf("status --help: exit %d, %s", r.code, r.stderr)
	}
	help := r.stdout
	now := time.Now()
	var b strings.Builder
	single := everySection(now)
	single.Workers.GroupSize = 0 // Workers: where a gang pool has Groups:
	printStatus(&b, []api.View{everySection(now), single}, now)
	out := b.String()
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^ *([A-Z][A-Za-z ]*):`).FindAllStringSubmatch(out, -1) {
		names = append(names, m[1]+":")
	}
	header := regexp.MustCompile(`(?m)^SLOT .*$`).FindString(out)
	if len(names) < 22 || header == "" {
		t.Fatalf("the fixture does not print every section (%v, header %q):\n%s", names, header, out)
	}
	names = append(names, strings.Fields(header)...)
	names = append(names, "×", "degraded")
	for _, n := range names {
		if !strings.Contains(help, n) {
			t.Errorf("status prints %q, which status --help does not describe:\n%s", n, out)
		}
	}
	for _, want := range []string{"ready (in discovery)", "not\n              ready", "readiness", "ports", "leader", "epoch", "share", "phase", "heartbeat", "quoted"} {
		if !strings.Contains(help, want) {
			t.Errorf("status --help does not say %q", want)
		}
	}
}
