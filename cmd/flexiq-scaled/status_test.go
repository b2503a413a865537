package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// Every operator's command says in one line that the daemon is not running,
// and fails.
func TestControlCommandsWithoutDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "control.sock")
	for _, args := range [][]string{
		{"status"}, {"status", "--json", "email"}, {"explain", "email"}, {"pause", "email", "--for", "10m"},
		{"resume", "email"}, {"pin", "email", "3"}, {"unpin", "email"},
	} {
		r := invoke(t, append(args, "--socket", sock)...)
		if r.code != exitFail || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "flexiq-scaled is not running") {
			t.Errorf("%q: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	for _, args := range [][]string{{"pin", "email"}, {"pin", "email", "x"}, {"explain"}, {"pause", "email", "--for", "-1m"}} {
		if r := invoke(t, append(args, "--socket", sock)...); r.code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, r.code, exitUsage)
		}
	}
}

func TestPrintStatus(t *testing.T) {
	now := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	up, cpu, age := 312.0, 12.5, 4.2
	v := api.View{
		Pool: "email", Mode: "paused",
		Override: &api.Override{Kind: api.OverridePaused},
		Workers:  api.WorkerCounts{Live: 1, Target: 1, Min: 1, Max: 10},
		Queue:    &api.QueueView{Pending: 40, Running: 2, OldestAgeSec: &age},
		Source:   api.SourceView{Type: "flexiq-sqlite", Healthy: true, LastSuccess: now.Add(-time.Second)},
		LastDecision: &api.Explanation{Time: now.Add(-time.Second), Action: "hold", Current: 1, Desired: 1,
			Rationale: "paused", HeldBy: "override"},
		WorkerList: []api.WorkerView{{Slot: 1, Unit: "flexiq-email@1.service", State: "active", UptimeSec: &up, CPUPercent: &cpu}},
	}
	var b strings.Builder
	printStatus(&b, []api.View{v}, now)
	for _, want := range []string{
		"● email - paused\n",
		"Workers: 1 live, 0 draining; target 1 (min 1, max 10)",
		"Queue: 40 pending, 2 running, 0 paused; oldest 4.2s",
		"Source: flexiq-sqlite: ok, last read 1.0s ago",
		"Decision: hold 1 -> 1, 1.0s ago (paused; held by override)",
		"SLOT  UNIT                    STATE   UPTIME  CPU%  MEMORY  RESTARTS",
		"1     flexiq-email@1.service  active  5m12s   12.5  -       0",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}

// A service pool's status shows its replicas ready and not ready apart,
// and each replica's readiness.
func TestPrintStatusService(t *testing.T) {
	now := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	ready, notReady := 1, 1
	v := api.View{
		Pool: "web", Mode: "active",
		Workers: api.WorkerCounts{Live: 2, Target: 2, Min: 1, Max: 10, Ready: &ready, NotReady: &notReady},
		WorkerList: []api.WorkerView{
			{Slot: 1, Unit: "flexiq-web@1.service", State: "active", Readiness: "ready"},
			{Slot: 2, Unit: "flexiq-web@2.service", State: "active", Readiness: "starting"},
		},
	}
	var b strings.Builder
	printStatus(&b, []api.View{v}, now)
	for _, want := range []string{"Replicas: 1 ready, 1 not ready", "flexiq-web@1.service  ready", "flexiq-web@2.service  starting"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}

// TestPrintStatusGroups: a gang pool's counts are groups, and say so.
func TestPrintStatusGroups(t *testing.T) {
	v := api.View{Pool: "web", Mode: "active", Workers: api.WorkerCounts{Live: 2, Draining: 1, Target: 2, Min: 1, Max: 4, GroupSize: 3}}
	var b strings.Builder
	printStatus(&b, []api.View{v}, time.Now())
	if want := "Groups: 2 live, 1 draining; target 2 (min 1, max 4); 3 ranks each"; !strings.Contains(b.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, b.String())
	}
	if strings.Contains(b.String(), "Workers:") {
		t.Errorf("a gang pool's status counts workers:\n%s", b.String())
	}
}

// TestPrintStatusActing: the starts and stops in flight are shown while
// there are any, and only then.
func TestPrintStatusActing(t *testing.T) {
	for _, tc := range []struct {
		starting, stopping int
		want               string
	}{
		{3, 1, "Acting: starting 3, stopping 1"},
		{0, 2, "Acting: starting 0, stopping 2"},
		{0, 0, ""},
	} {
		v := api.View{Pool: "work", Mode: "active", Workers: api.WorkerCounts{Live: 1, Target: 4, Max: 8, Starting: tc.starting, Stopping: tc.stopping}}
		var b strings.Builder
		printStatus(&b, []api.View{v}, time.Now())
		if got := strings.Contains(b.String(), "Acting:"); got != (tc.want != "") || !strings.Contains(b.String(), tc.want) {
			t.Errorf("starting %d, stopping %d: status\n%s\nwant %q", tc.starting, tc.stopping, b.String(), tc.want)
		}
	}
}
