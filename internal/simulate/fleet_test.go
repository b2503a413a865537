package simulate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// steadyTrace is 200 jobs waiting, every 5 s for two minutes: 20 workers.
func steadyTrace() string {
	var b strings.Builder
	b.WriteString("t,pending,running\n")
	for t := 0; t <= 120; t += 5 {
		fmt.Fprintf(&b, "%d,200,0\n", t)
	}
	return b.String()
}

func runFleet(t *testing.T, opt FleetOptions) []fleetRow {
	t.Helper()
	pool := testPool()
	pool.MaxWorkers = 30
	var out bytes.Buffer
	if err := RunFleet(pool, strings.NewReader(steadyTrace()), opt, FormatJSONL, &out); err != nil {
		t.Fatal(err)
	}
	var rows []fleetRow
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r fleetRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	return rows
}

func TestRunFleetLeaderLoss(t *testing.T) {
	hosts := []fleet.Host{{ID: "a", Capacity: 10}, {ID: "b", Capacity: 10}, {ID: "c", Capacity: 10}}
	rows := runFleet(t, FleetOptions{Hosts: hosts, Fail: FailLeader, FailAt: 30})
	var lastEpoch uint64
	var failedAt, newLeaderAt float64 = -1, -1
	prevLive := map[string]int{}
	for _, r := range rows {
		if r.Epoch < lastEpoch {
			t.Fatalf("t=%g: epoch %d after %d", r.T, r.Epoch, lastEpoch)
		}
		lastEpoch = r.Epoch
		if r.Event != "" {
			failedAt = r.T
			if r.Event != "power off a" {
				t.Fatalf("event %q, want the first leader a powered off", r.Event)
			}
		}
		if failedAt >= 0 && newLeaderAt < 0 && r.Leader != "" {
			newLeaderAt = r.T
		}
		for _, h := range r.Hosts {
			if h.Live > h.Capacity {
				t.Fatalf("t=%g: host %s runs %d over its capacity %d", r.T, h.ID, h.Live, h.Capacity)
			}
			// The survivors never scale down while the fleet fails over.
			if h.Alive && failedAt >= 0 && h.Live < prevLive[h.ID] {
				t.Fatalf("t=%g: host %s dropped from %d to %d", r.T, h.ID, prevLive[h.ID], h.Live)
			}
			prevLive[h.ID] = h.Live
		}
	}
	if failedAt != 30 || newLeaderAt < 0 || newLeaderAt-failedAt > (fleet.DefaultTTL.Seconds()+5) {
		t.Fatalf("failure at %g, new leader at %g: want one within TTL + one tick", failedAt, newLeaderAt)
	}
	if rows[5].Live != 20 || rows[5].Leader != "a" || rows[5].Epoch != 1 {
		t.Errorf("before the failure: %+v, want 20 live under a at epoch 1", rows[5])
	}
	last := rows[len(rows)-1]
	if last.Live != 20 || last.Leader != "b" || last.Epoch != 2 {
		t.Errorf("at the end: %+v, want 20 live again under b at epoch 2", last)
	}
}

func TestRunFleetCapacityShort(t *testing.T) {
	hosts := []fleet.Host{{ID: "a", Capacity: 4}, {ID: "b", Capacity: 8}}
	rows := runFleet(t, FleetOptions{Hosts: hosts})
	last := rows[len(rows)-1]
	if last.Target != 20 || last.Live != 12 || last.Hosts[0].Live != 4 || last.Hosts[1].Live != 8 {
		t.Errorf("%+v: want target 20, each host full", last)
	}
}

func TestRunFleetTable(t *testing.T) {
	var out bytes.Buffer
	opt := FleetOptions{Hosts: []fleet.Host{{ID: "a", Capacity: 10}, {ID: "b", Capacity: 10}}, Fail: "b", FailAt: 10}
	if err := RunFleet(testPool(), strings.NewReader("t,pending,running\n0,50,0\n10,50,0\n"), opt, FormatTable, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LEADER", "a(10)", "b(10)", "power off b", "down", "fresh"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if err := RunFleet(testPool(), strings.NewReader("t,pending,running\n"), FleetOptions{}, FormatTable, &out); err == nil {
		t.Error("a fleet of no host ran")
	}
}

func TestParseFleet(t *testing.T) {
	tests := []struct {
		hosts   string
		want    []fleet.Host
		wantErr bool
	}{
		{"a=10,b=5", []fleet.Host{{ID: "a", Capacity: 10}, {ID: "b", Capacity: 5}}, false},
		{" a=0 ", []fleet.Host{{ID: "a", Capacity: 0}}, false},
		{"a=1,a=2", nil, true},
		{"leader=3", nil, true},
		{"a", nil, true},
		{"a=-1", nil, true},
		{"=3", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseFleetHosts(tt.hosts)
		if (err != nil) != tt.wantErr || fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("ParseFleetHosts(%q) = %v, %v", tt.hosts, got, err)
		}
	}
	if id, at, down, err := ParseFleetFail("leader@12.5"); err != nil || id != FailLeader || at != 12.5 || down != 0 {
		t.Errorf("ParseFleetFail = %q %g %g %v", id, at, down, err)
	}
	if id, at, down, err := ParseFleetFail("b@30+4.5"); err != nil || id != "b" || at != 30 || down != 4.5 {
		t.Errorf("ParseFleetFail = %q %g %g %v", id, at, down, err)
	}
	for _, bad := range []string{"a", "@3", "a@x", "a@-1", "a@3+", "a@3+0", "a@3+-1", "a@NaN", "a@3+x", "a@1e308+1e308"} {
		if _, _, _, err := ParseFleetFail(bad); err == nil {
			t.Errorf("ParseFleetFail(%q) passed", bad)
		}
	}
}

// TestRunFleetDaemonKilled is the leader's daemon killed for 5 s (SIGKILL,
// then systemd's restart): its workers keep running, no host's count ever
// drops, a leader is back within TTL + one tick, and the epoch grows.
func TestRunFleetDaemonKilled(t *testing.T) {
	hosts := []fleet.Host{{ID: "a", Capacity: 10}, {ID: "b", Capacity: 10}, {ID: "c", Capacity: 10}}
	rows := runFleet(t, FleetOptions{Hosts: hosts, Fail: FailLeader, FailAt: 30, Down: 5})
	var lastEpoch uint64
	noLeaderSince := -1.0
	for i, r := range rows {
		if r.Epoch < lastEpoch {
			t.Fatalf("t=%g: epoch %d after %d", r.T, r.Epoch, lastEpoch)
		}
		lastEpoch = r.Epoch
		if i > 0 && r.Live < rows[i-1].Live {
			t.Fatalf("t=%g: the fleet dropped from %d to %d", r.T, rows[i-1].Live, r.Live)
		}
		switch {
		case r.Leader == "" && noLeaderSince < 0:
			noLeaderSince = r.T
		case r.Leader != "" && noLeaderSince >= 0:
			if r.T-noLeaderSince > fleet.DefaultTTL.Seconds()+5 {
				t.Fatalf("no leader from %g to %g", noLeaderSince, r.T)
			}
			noLeaderSince = -1
		}
	}
	if rows[6].Event != "daemon killed on a" || rows[7].Event != "daemon back on a" {
		t.Errorf("events %q, %q", rows[6].Event, rows[7].Event)
	}
	last := rows[len(rows)-1]
	if last.Live != 20 || last.Epoch != 2 || last.Leader == "" {
		t.Errorf("at the end: %+v, want 20 live under a new epoch 2", last)
	}
}
