package units_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

func TestNames(t *testing.T) {
	if got, want := units.UnitName("email", 3), "flexiq-email@3.service"; got != want {
		t.Errorf("UnitName = %q, want %q", got, want)
	}
	if got, want := units.SliceName("email"), "flexiq-email.slice"; got != want {
		t.Errorf("SliceName = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		name string
		pool string
		slot int
		ok   bool
	}{
		{"flexiq-email@0.service", "email", 0, true},
		{"flexiq-email@12.service", "email", 12, true},
		{"flexiq-bulk_mail2@7.service", "bulk_mail2", 7, true},
		{"flexiq-email@.service", "", 0, false},   // the template itself
		{"flexiq-email@01.service", "", 0, false}, // not what UnitName makes
		{"flexiq-email@+1.service", "", 0, false}, // ditto
		{"flexiq-email@-1.service", "", 0, false}, // negative slot
		{"flexiq-email@1x.service", "", 0, false}, // not a number
		{"flexiq-email@1.scope", "", 0, false},    // wrong type
		{"flexiq-email.slice", "", 0, false},      // the pool slice
		{"flexiq-scaled.service", "", 0, false},   // the daemon itself
		{"other-email@1.service", "", 0, false},   // wrong prefix
		{"flexiq-@1.service", "", 0, false},       // empty pool
		{"flexiq-Email@1.service", "", 0, false},  // upper case
		{"flexiq-a-b@1.service", "", 0, false},    // dash: would nest slices
		{"flexiq-a@b@1.service", "", 0, false},    // two @
		{"flexiq-email@99999999999999999999.service", "", 0, false},
		{"flexiq-" + strings.Repeat("a", 33) + "@1.service", "", 0, false},
	} {
		pool, slot, ok := units.ParseUnitName(tc.name)
		if pool != tc.pool || slot != tc.slot || ok != tc.ok {
			t.Errorf("ParseUnitName(%q) = %q, %d, %v; want %q, %d, %v", tc.name, pool, slot, ok, tc.pool, tc.slot, tc.ok)
		}
		if ok {
			if back := units.UnitName(pool, slot); back != tc.name {
				t.Errorf("UnitName(ParseUnitName(%q)) = %q", tc.name, back)
			}
		}
	}
}

// Every property of a full spec reaches systemd with the meaning intended,
// as systemctl reports it.
func TestStartWorkerProperties(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 30*time.Second)
	m := newManager(t, sb)

	const pool = "full"
	marker := "units-full-marker"
	unit := start(t, ctx, m, sb, units.WorkerSpec{
		Pool: pool, Slot: 1,
		Exec:             []string{"/bin/sh", "-c", "echo " + marker + " $FLEXIQ_SCALED_POOL/$FLEXIQ_SCALED_SLOT; exec sleep 1000"},
		User:             "nobody",
		Group:            "nogroup",
		WorkingDirectory: "/tmp",
		// The pool's own FLEXIQ_SCALED_SLOT must lose to the real one.
		Environment:        map[string]string{"Z_LAST": "z", "A_FIRST": "a", "FLEXIQ_SCALED_SLOT": "99"},
		KillSignal:         2,
		StopTimeout:        3 * time.Second,
		CPUQuotaPerSecUSec: 500_000,
		MemoryMax:          64 << 20,
		TasksMax:           32,
	})
	if unit != "flexiq-full@1.service" {
		t.Fatalf("unit %q", unit)
	}

	got := show(t, ctx, sb, unit, "Description", "Type", "KillMode", "KillSignal", "TimeoutStopUSec", "SendSIGKILL",
		"Environment", "Slice", "ControlGroup", "CPUQuotaPerSecUSec", "MemoryMax", "TasksMax", "User", "Group",
		"WorkingDirectory", "CPUAccounting", "MemoryAccounting", "ActiveState", "MainPID", "CollectMode", "LogExtraFields")
	want := map[string]string{
		"Description":        "flexiq-scaled worker full/1",
		"Type":               "exec",
		"KillMode":           "mixed",
		"KillSignal":         "2",
		"TimeoutStopUSec":    "3s",
		"SendSIGKILL":        "yes",
		"Environment":        "A_FIRST=a FLEXIQ_SCALED_POOL=full FLEXIQ_SCALED_SLOT=1 Z_LAST=z",
		"Slice":              "flexiq-full.slice",
		"ControlGroup":       "/flexiq.slice/flexiq-full.slice/flexiq-full@1.service",
		"CPUQuotaPerSecUSec": "500ms",
		"MemoryMax":          "67108864",
		"TasksMax":           "32",
		"User":               "nobody",
		"Group":              "nogroup",
		"WorkingDirectory":   "/tmp",
		"CPUAccounting":      "yes",
		"MemoryAccounting":   "yes",
		"ActiveState":        "active",
		"CollectMode":        "inactive",
		"LogExtraFields":     "FLEXIQ_POOL=full FLEXIQ_SLOT=1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}

	// The process really runs as nobody:nogroup, in /tmp.
	pid := got["MainPID"]
	if out, err := sb.Exec(ctx, "stat", "-c", "%U:%G", "/proc/"+pid); err != nil || strings.TrimSpace(out) != "nobody:nogroup" {
		t.Errorf("owner of main process %s = %q (%v), want nobody:nogroup", pid, out, err)
	}
	if out, err := sb.Exec(ctx, "readlink", "/proc/"+pid+"/cwd"); err != nil || strings.TrimSpace(out) != "/tmp" {
		t.Errorf("cwd of main process = %q (%v), want /tmp", out, err)
	}

	// LogExtraFields: the pool's field finds the worker's output.
	waitFor(t, ctx, "the worker's output under FLEXIQ_POOL="+pool, func() bool {
		entries, err := sb.Journal(ctx, "FLEXIQ_POOL="+pool)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Field("MESSAGE") == marker+" full/1" {
				if e.Field("FLEXIQ_SLOT") != "1" || e.Field("_SYSTEMD_UNIT") != unit {
					t.Errorf("journal entry fields FLEXIQ_SLOT=%q _SYSTEMD_UNIT=%q", e.Field("FLEXIQ_SLOT"), e.Field("_SYSTEMD_UNIT"))
				}
				return true
			}
		}
		return false
	})
}

// A bare command name is looked up by systemd in its own search path, as
// the config's app shortcut (["flexiq", "worker", ...]) relies on.
func TestStartWorkerBareCommand(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 10*time.Second)
	m := newManager(t, sb)
	unit := start(t, ctx, m, sb, units.WorkerSpec{Pool: "bare", Slot: 1, Exec: []string{"sleep", "1000"}})
	if got := show(t, ctx, sb, unit, "ActiveState", "SubState"); got["ActiveState"] != "active" || got["SubState"] != "running" {
		t.Errorf("%s: %v", unit, got)
	}
}

func TestStartWorkerRejectsBadSpecs(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 10*time.Second)
	m := newManager(t, sb)
	for _, s := range []units.WorkerSpec{
		{Pool: "a-b", Slot: 1, Exec: []string{"/bin/true"}},
		{Pool: "ok", Slot: -1, Exec: []string{"/bin/true"}},
		{Pool: "ok", Slot: 1},
	} {
		if err := m.StartWorker(ctx, s); err == nil {
			t.Errorf("StartWorker(%+v) succeeded", s)
		}
	}
}

func TestListWorkers(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 30*time.Second)
	m := newManager(t, sb)

	t0 := time.Now()
	a1 := start(t, ctx, m, sb, sleeper("lista", 1))
	a2 := start(t, ctx, m, sb, sleeper("lista", 2))
	b1 := start(t, ctx, m, sb, sleeper("listb", 1))

	ws, err := m.ListWorkers(ctx, "lista")
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].Unit != a1 || ws[1].Unit != a2 {
		t.Fatalf("ListWorkers(lista) = %+v, want %s and %s", ws, a1, a2)
	}
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for i, w := range ws {
		if w.Pool != "lista" || w.Slot != i+1 {
			t.Errorf("%s: pool %q slot %d", w.Unit, w.Pool, w.Slot)
		}
		if w.ActiveState != "active" || w.SubState != "running" || w.Result != "success" {
			t.Errorf("%s: state %s/%s result %s", w.Unit, w.ActiveState, w.SubState, w.Result)
		}
		if w.ControlGroup != "/flexiq.slice/flexiq-lista.slice/"+w.Unit {
			t.Errorf("%s: ControlGroup %q", w.Unit, w.ControlGroup)
		}
		if !hex32.MatchString(w.InvocationID) {
			t.Errorf("%s: InvocationID %q", w.Unit, w.InvocationID)
		}
		if w.ActiveEnter.Before(t0.Add(-2*time.Second)) || w.ActiveEnter.After(time.Now().Add(2*time.Second)) {
			t.Errorf("%s: ActiveEnter %v, want about %v", w.Unit, w.ActiveEnter, t0)
		}
		// The same facts as systemctl tells them.
		sys := show(t, ctx, sb, w.Unit, "MainPID", "InvocationID")
		if w.MainPID == 0 || sys["MainPID"] != utoa(w.MainPID) {
			t.Errorf("%s: MainPID %d, systemctl says %s", w.Unit, w.MainPID, sys["MainPID"])
		}
		if sys["InvocationID"] != w.InvocationID {
			t.Errorf("%s: InvocationID %s, systemctl says %s", w.Unit, w.InvocationID, sys["InvocationID"])
		}
	}
	if ws[0].InvocationID == ws[1].InvocationID {
		t.Errorf("two units share InvocationID %s", ws[0].InvocationID)
	}

	ws, err = m.ListWorkers(ctx, "listb")
	if err != nil || len(ws) != 1 || ws[0].Unit != b1 {
		t.Errorf("ListWorkers(listb) = %+v, %v; want only %s", ws, err, b1)
	}
	all, err := m.ListWorkers(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, w := range all {
		seen[w.Unit] = true
		if _, _, ok := units.ParseUnitName(w.Unit); !ok {
			t.Errorf("ListWorkers(\"\") returned non-worker %s", w.Unit)
		}
	}
	for _, u := range []string{a1, a2, b1} {
		if !seen[u] {
			t.Errorf("ListWorkers(\"\") misses %s", u)
		}
	}
	if ws, err := m.ListWorkers(ctx, "listnone"); err != nil || len(ws) != 0 {
		t.Errorf("ListWorkers(listnone) = %+v, %v; want none", ws, err)
	}
	if _, err := m.ListWorkers(ctx, "bad-pool"); err == nil {
		t.Error("ListWorkers(bad-pool) succeeded")
	}
}
