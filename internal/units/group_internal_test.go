package units

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCPUSetMask(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []byte
		err  bool
	}{
		{in: "", want: nil},
		{in: "0", want: []byte{0x01}},
		{in: "1", want: []byte{0x02}},
		{in: "0-1", want: []byte{0x03}},
		{in: "2,3", want: []byte{0x0c}},
		{in: "7-8", want: []byte{0x80, 0x01}},
		{in: "0, 9-10", want: []byte{0x01, 0x06}},
		{in: "16", want: []byte{0, 0, 0x01}},
		{in: "-1", err: true},
		{in: "3-1", err: true},
		{in: "a", err: true},
		{in: "01", err: true},
		{in: "1,", err: true},
		{in: "8192", err: true},
		{in: "0-", err: true},
	} {
		got, err := cpuSetMask(tc.in)
		if (err != nil) != tc.err || !bytes.Equal(got, tc.want) {
			t.Errorf("cpuSetMask(%q) = %#v, %v; want %#v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func groupSpec() WorkerSpec {
	return WorkerSpec{
		Pool: "llm", Slot: 4, Exec: []string{"/bin/sleep", "1000"}, Revision: "r1",
		Environment: map[string]string{"A": "spec", "B": "spec"},
		Ranks: []RankSpec{
			{Environment: map[string]string{"FLEXIQ_RANK": "0", "B": "rank0"}, AllowedCPUs: "0"},
			{Environment: map[string]string{"FLEXIQ_RANK": "1"}, AllowedCPUs: "1-2"},
			{Environment: map[string]string{"FLEXIQ_RANK": "2", "FLEXIQ_SCALED_SLOT": "99"}},
		},
	}
}

func rankProps(t *testing.T, s WorkerSpec, rank int) map[string]any {
	t.Helper()
	props, err := s.RankProperties(rank)
	if err != nil {
		t.Fatalf("rank %d: %v", rank, err)
	}
	m := map[string]any{}
	for _, p := range props {
		m[p.Name] = p.Value.Value()
	}
	return m
}

func TestGroupProperties(t *testing.T) {
	s := groupSpec()
	for _, tc := range []struct {
		rank        int
		env         []string
		cpus        []byte
		bindsTo     []string
		description string
	}{
		{0, []string{"A=spec", "B=rank0", "FLEXIQ_RANK=0", "FLEXIQ_SCALED_POOL=llm", "FLEXIQ_SCALED_SLOT=4"}, []byte{0x01},
			[]string{"flexiq-llm@4-r1.service", "flexiq-llm@4-r2.service"}, "flexiq-scaled worker llm/4-r0 rev r1"},
		{1, []string{"A=spec", "B=spec", "FLEXIQ_RANK=1", "FLEXIQ_SCALED_POOL=llm", "FLEXIQ_SCALED_SLOT=4"}, []byte{0x06},
			[]string{"flexiq-llm@4.service"}, "flexiq-scaled worker llm/4-r1 rev r1"},
		// The slot is the daemon's to say, whatever a rank's environment.
		{2, []string{"A=spec", "B=spec", "FLEXIQ_RANK=2", "FLEXIQ_SCALED_POOL=llm", "FLEXIQ_SCALED_SLOT=4"}, nil,
			[]string{"flexiq-llm@4.service"}, "flexiq-scaled worker llm/4-r2 rev r1"},
	} {
		p := rankProps(t, s, tc.rank)
		if got := p["Environment"]; !reflect.DeepEqual(got, tc.env) {
			t.Errorf("rank %d: Environment %q, want %q", tc.rank, got, tc.env)
		}
		if got, _ := p["AllowedCPUs"].([]byte); !bytes.Equal(got, tc.cpus) {
			t.Errorf("rank %d: AllowedCPUs %#v, want %#v", tc.rank, got, tc.cpus)
		}
		if got := p["BindsTo"]; !reflect.DeepEqual(got, tc.bindsTo) {
			t.Errorf("rank %d: BindsTo %q, want %q", tc.rank, got, tc.bindsTo)
		}
		if _, ok := p["After"]; ok {
			t.Errorf("rank %d: ordered (After=): ranks must start and stop in parallel", tc.rank)
		}
		if got := p["Description"]; got != tc.description || ParseRevision(tc.description) != "r1" {
			t.Errorf("rank %d: Description %q, want %q carrying the revision", tc.rank, got, tc.description)
		}
		fields, _ := p["LogExtraFields"].([][]byte)
		if !slices.ContainsFunc(fields, func(f []byte) bool { return string(f) == "FLEXIQ_RANK="+string(rune('0'+tc.rank)) }) {
			t.Errorf("rank %d: LogExtraFields %q lack FLEXIQ_RANK", tc.rank, fields)
		}
		if p["Type"] != "exec" {
			t.Errorf("rank %d: Type %v, want exec", tc.rank, p["Type"])
		}
	}
	if _, err := s.RankProperties(3); err == nil {
		t.Error("RankProperties(3) of a group of 3 succeeded")
	}
	if _, err := s.RankProperties(-1); err == nil {
		t.Error("RankProperties(-1) succeeded")
	}
	bad := groupSpec()
	bad.Ranks[1].AllowedCPUs = "2-1"
	if _, err := bad.RankProperties(1); err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("a bad cpu list: %v, want an error naming rank 1", err)
	}
}

// One rank, or none, is a single unit: no dependencies, no rank in its
// names, but the one RankSpec still applies.
func TestSingleRankIsOneUnit(t *testing.T) {
	for _, ranks := range [][]RankSpec{nil, {{Environment: map[string]string{"X": "1"}, AllowedCPUs: "1"}}} {
		s := WorkerSpec{Pool: "web", Slot: 2, Exec: []string{"/bin/true"}, Ranks: ranks}
		p := rankProps(t, s, 0)
		if _, ok := p["BindsTo"]; ok {
			t.Errorf("%d ranks: BindsTo set", len(ranks))
		}
		if p["Description"] != "flexiq-scaled worker web/2" {
			t.Errorf("%d ranks: Description %q", len(ranks), p["Description"])
		}
		env, _ := p["Environment"].([]string)
		cpus, _ := p["AllowedCPUs"].([]byte)
		if len(ranks) == 1 && (!slices.Contains(env, "X=1") || !bytes.Equal(cpus, []byte{0x02})) {
			t.Errorf("one rank: Environment %q, AllowedCPUs %#v; want the rank's applied", env, cpus)
		}
		if got := s.rankUnits(); !reflect.DeepEqual(got, []string{"flexiq-web@2.service"}) {
			t.Errorf("%d ranks: units %q", len(ranks), got)
		}
	}
}

func TestNotifyReadyProperties(t *testing.T) {
	s := WorkerSpec{Pool: "web", Slot: 1, Exec: []string{"/bin/true"}, NotifyReady: true}
	p := rankProps(t, s, 0)
	if p["Type"] != "notify" || p["NotifyAccess"] != "main" || p["TimeoutStartUSec"] != uint64(math.MaxUint64) {
		t.Errorf("Type %v, NotifyAccess %v, TimeoutStartUSec %v; want notify, main, infinity", p["Type"], p["NotifyAccess"], p["TimeoutStartUSec"])
	}
	s.NotifyReady = false
	if _, ok := rankProps(t, s, 0)["TimeoutStartUSec"]; ok {
		t.Error("TimeoutStartUSec set for Type=exec")
	}
}

func TestFoldRanks(t *testing.T) {
	w := func(pool string, slot, rank int, state string, inactive time.Duration) Worker {
		unit := UnitName(pool, slot)
		if rank > 0 {
			unit = RankUnitName(pool, slot, rank)
		}
		sub := map[string]string{"active": "running", "activating": "start", "deactivating": "stop-sigterm", "failed": "failed", "inactive": "dead"}[state]
		return Worker{Unit: unit, Pool: pool, Slot: slot, Rank: rank, ActiveState: state, SubState: sub, InactiveEnterMono: inactive,
			Result: "success", ExecMainCode: 1}
	}
	// head is rank 0 as folded: its own states kept, the group's set.
	head := func(r0 Worker, state, sub string, ranks ...Worker) Worker {
		r0.UnitActiveState, r0.UnitSubState = r0.ActiveState, r0.SubState
		r0.ActiveState, r0.SubState, r0.Ranks = state, sub, ranks
		return r0
	}
	missing := func(pool string, slot int, state, sub string, ranks ...Worker) Worker {
		return Worker{Unit: UnitName(pool, slot), Pool: pool, Slot: slot, Missing: true, ActiveState: state, SubState: sub, Ranks: ranks}
	}
	killed := w("a", 3, 1, "failed", 5)
	killed.Result, killed.ExecMainCode, killed.ExecMainStatus = "signal", 2, 9
	stoppedLate := w("a", 3, 0, "failed", 7)
	stoppedLate.Result, stoppedLate.ExecMainStatus = "exit-code", 143
	failedHead := head(stoppedLate, "failed", "failed", killed, w("a", 3, 2, "inactive", 6))
	failedHead.Result, failedHead.ExecMainCode, failedHead.ExecMainStatus, failedHead.FailedRank = "signal", 2, 9, 1
	lonelyFailed := missing("a", 3, "failed", "failed", killed, w("a", 3, 2, "inactive", 6))
	lonelyFailed.Result, lonelyFailed.ExecMainCode, lonelyFailed.ExecMainStatus, lonelyFailed.FailedRank = "signal", 2, 9, 1

	for _, tc := range []struct {
		name string
		in   []Worker
		want []Worker
	}{
		{"empty", nil, nil},
		{"single units stay as they are, sorted",
			[]Worker{w("b", 1, 0, "active", 0), w("a", 2, 0, "activating", 0), w("a", 1, 0, "failed", 1)},
			[]Worker{head(w("a", 1, 0, "failed", 1), "failed", "failed"), head(w("a", 2, 0, "activating", 0), "activating", "start"),
				head(w("b", 1, 0, "active", 0), "active", "running")}},
		{"ranks fold into rank 0, by rank",
			[]Worker{w("a", 1, 2, "active", 0), w("a", 2, 0, "active", 0), w("a", 1, 0, "active", 0), w("a", 1, 1, "active", 0)},
			[]Worker{head(w("a", 1, 0, "active", 0), "active", "running", w("a", 1, 1, "active", 0), w("a", 1, 2, "active", 0)),
				head(w("a", 2, 0, "active", 0), "active", "running")}},
		{"a rank not yet ready: the group is activating",
			[]Worker{w("a", 1, 0, "active", 0), w("a", 1, 1, "activating", 0)},
			[]Worker{head(w("a", 1, 0, "active", 0), "activating", "start", w("a", 1, 1, "activating", 0))}},
		{"a rank down, another up: the group is stopping",
			[]Worker{w("a", 1, 0, "active", 0), w("a", 1, 1, "failed", 3)},
			[]Worker{head(w("a", 1, 0, "active", 0), "deactivating", "stop", w("a", 1, 1, "failed", 3))}},
		{"all down: failed, with the first failure's rank and exit",
			[]Worker{w("a", 3, 2, "inactive", 6), killed, stoppedLate},
			[]Worker{failedHead}},
		{"all down, none failed: inactive",
			[]Worker{w("a", 1, 0, "inactive", 2), w("a", 1, 1, "inactive", 1)},
			[]Worker{head(w("a", 1, 0, "inactive", 2), "inactive", "dead", w("a", 1, 1, "inactive", 1))}},
		{"a stopping straggler keeps its slot taken",
			[]Worker{killed, w("a", 3, 2, "deactivating", 0)},
			[]Worker{missing("a", 3, "deactivating", "stop", killed, w("a", 3, 2, "deactivating", 0))}},
		{"failed stragglers make a failed rank 0",
			[]Worker{w("a", 3, 2, "inactive", 6), killed},
			[]Worker{lonelyFailed}},
		{"the same slot in two pools is two workers",
			[]Worker{w("b", 1, 1, "active", 0), w("a", 1, 0, "active", 0)},
			[]Worker{head(w("a", 1, 0, "active", 0), "active", "running"), missing("b", 1, "deactivating", "stop", w("b", 1, 1, "active", 0))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FoldRanks(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("FoldRanks:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestFirstDown(t *testing.T) {
	type m struct {
		state    string
		inactive time.Duration
	}
	for _, tc := range []struct {
		members []m
		want    int
	}{
		{[]m{{"active", 0}, {"failed", 5}, {"active", 0}}, 1},
		// Rank 0 failed of rank 1's failure, later.
		{[]m{{"failed", 9}, {"failed", 5}, {"inactive", 7}}, 1},
		{[]m{{"inactive", 3}, {"active", 0}, {"failed", 8}}, 2}, // a failure explains more than an exit
		{[]m{{"active", 0}, {"inactive", 4}, {"inactive", 2}}, 1},
		{[]m{{"active", 0}, {"active", 0}, {"activating", 0}}, 2},
	} {
		var ws []Worker
		for r, x := range tc.members {
			ws = append(ws, Worker{Rank: r, ActiveState: x.state, InactiveEnterMono: x.inactive})
		}
		if got := firstDown(ws); got != tc.want {
			t.Errorf("firstDown(%v) = %d, want %d", tc.members, got, tc.want)
		}
	}
}
