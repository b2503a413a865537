package units

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// systemdSignatures are the D-Bus signatures systemd 252 declares for the
// properties a worker sets (busctl introspect org.freedesktop.systemd1
// /org/freedesktop/systemd1/unit/... org.freedesktop.systemd1.Service).
// StartTransientUnit refuses any other with "Invalid argument", and only
// for the preset that uses the property, so every property is checked here
// for every preset. A new property must be added with its declared
// signature.
var systemdSignatures = map[string]string{
	"Description":             "s",
	"Type":                    "s",
	"ExecStart":               "a(sasb)",
	"Environment":             "as",
	"EnvironmentFiles":        "a(sb)",
	"Slice":                   "s",
	"KillMode":                "s",
	"SendSIGKILL":             "b",
	"CPUAccounting":           "b",
	"MemoryAccounting":        "b",
	"LogExtraFields":          "aay",
	"User":                    "s",
	"Group":                   "s",
	"WorkingDirectory":        "s",
	"KillSignal":              "i",
	"TimeoutStopUSec":         "t",
	"CPUQuotaPerSecUSec":      "t",
	"MemoryMax":               "t",
	"TasksMax":                "t",
	"NoNewPrivileges":         "b",
	"PrivateTmp":              "b",
	"ProtectSystem":           "s",
	"ProtectKernelTunables":   "b",
	"ProtectKernelModules":    "b",
	"ProtectKernelLogs":       "b",
	"ProtectControlGroups":    "b",
	"ProtectClock":            "b",
	"ProtectHostname":         "b",
	"RestrictSUIDSGID":        "b",
	"RestrictRealtime":        "b",
	"LockPersonality":         "b",
	"ProtectHome":             "s",
	"PrivateDevices":          "b",
	"PrivateIPC":              "b",
	"ProtectProc":             "s",
	"CapabilityBoundingSet":   "t",
	"RestrictNamespaces":      "t",
	"RestrictAddressFamilies": "(bas)",
	"SystemCallArchitectures": "as",
	"SystemCallFilter":        "(bas)",
	"SystemCallErrorNumber":   "i",
	"UMask":                   "u",
	"ReadWritePaths":          "as",
	"Requires":                "as",
	"After":                   "as",
	"ExecCondition":           "a(sasb)",
	"AllowedCPUs":             "ay",
	"NotifyAccess":            "s",
	"TimeoutStartUSec":        "t",
	"BindsTo":                 "as",
}

func fullSpec(preset string) WorkerSpec {
	return WorkerSpec{
		Pool: "email", Slot: 3,
		Exec:               []string{"/usr/bin/python3", "-m", "worker"},
		User:               "app",
		Group:              "app",
		WorkingDirectory:   "/srv/app",
		Environment:        map[string]string{"A": "1"},
		EnvironmentFiles:   []string{"/etc/app.env", "-/etc/app.local.env"},
		Hardening:          preset,
		Revision:           "3f2a9c",
		KillSignal:         15,
		StopTimeout:        30 * time.Second,
		CPUQuotaPerSecUSec: 1, MemoryMax: 1, TasksMax: 1,
		Requires:       []string{"postgresql.service"},
		StartCondition: []string{"/bin/sh", "-c", "test -e /srv/ready"},
	}
}

func TestPropertySignatures(t *testing.T) {
	for _, preset := range append([]string{""}, HardeningPresets...) {
		props, err := fullSpec(preset).Properties()
		if err != nil {
			t.Fatalf("preset %q: %v", preset, err)
		}
		// And every rank of a notify gang group with cpusets.
		group := fullSpec(preset)
		group.NotifyReady = true
		group.Ranks = []RankSpec{{AllowedCPUs: "0"}, {AllowedCPUs: "1"}}
		for rank := range group.Ranks {
			p, err := group.RankProperties(rank)
			if err != nil {
				t.Fatalf("preset %q, rank %d: %v", preset, rank, err)
			}
			checkSignatures(t, fmt.Sprintf("preset %q, rank %d", preset, rank), p)
		}
		checkSignatures(t, fmt.Sprintf("preset %q", preset), props)
	}
}

func checkSignatures(t *testing.T, preset string, props []sddbus.Property) {
	t.Helper()
	seen := map[string]bool{}
	for _, p := range props {
		if seen[p.Name] {
			t.Errorf("%s: %s set twice", preset, p.Name)
		}
		seen[p.Name] = true
		want, ok := systemdSignatures[p.Name]
		if !ok {
			t.Errorf("%s: %s: no known systemd signature; look it up and add it", preset, p.Name)
			continue
		}
		if got := p.Value.Signature().String(); got != want {
			t.Errorf("%s: %s has signature %s, systemd declares %s", preset, p.Name, got, want)
		}
	}
}

// propMap is props by name, for the assertions below.
func propMap(t *testing.T, s WorkerSpec) map[string]any {
	t.Helper()
	props, err := s.Properties()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	for _, p := range props {
		m[p.Name] = p.Value.Value()
	}
	return m
}

func TestStopTimeoutProperty(t *testing.T) {
	for _, tc := range []struct {
		timeout time.Duration
		want    uint64
	}{
		{0, math.MaxUint64}, // "no limit" is infinity, never systemd's 90 s default
		{2 * time.Second, 2_000_000},
		{1500 * time.Millisecond, 1_500_000},
	} {
		s := fullSpec("")
		s.StopTimeout = tc.timeout
		if got := propMap(t, s)["TimeoutStopUSec"]; got != tc.want {
			t.Errorf("StopTimeout %v: TimeoutStopUSec %v, want %d", tc.timeout, got, tc.want)
		}
	}
	s := fullSpec("")
	s.StopTimeout = -time.Second
	if _, err := s.Properties(); err == nil {
		t.Error("a negative StopTimeout was accepted")
	}
}

func TestEnvironmentFilesProperty(t *testing.T) {
	got := propMap(t, fullSpec(""))["EnvironmentFiles"]
	want := []envFile{{"/etc/app.env", false}, {"/etc/app.local.env", true}}
	files, ok := got.([]envFile)
	if !ok || len(files) != len(want) || files[0] != want[0] || files[1] != want[1] {
		t.Errorf("EnvironmentFiles = %#v, want %#v", got, want)
	}
	s := fullSpec("")
	s.EnvironmentFiles = nil
	if _, ok := propMap(t, s)["EnvironmentFiles"]; ok {
		t.Error("EnvironmentFiles set without files")
	}
	for _, bad := range []string{"app.env", "-app.env", "", "-", "/etc/../etc/app.env", "/etc//app.env", "--/etc/app.env"} {
		s.EnvironmentFiles = []string{bad}
		if _, err := s.Properties(); err == nil {
			t.Errorf("environment file %q accepted", bad)
		}
	}
}

func TestHardeningProperties(t *testing.T) {
	none, def, strict := propMap(t, fullSpec("none")), propMap(t, fullSpec("")), propMap(t, fullSpec("strict"))
	if d := propMap(t, fullSpec("default")); len(d) != len(def) {
		t.Errorf(`"default" and "" differ: %d and %d properties`, len(d), len(def))
	}
	for _, name := range []string{"NoNewPrivileges", "PrivateTmp", "ProtectSystem", "ProtectKernelTunables", "ProtectHome", "SystemCallFilter", "ReadWritePaths"} {
		if _, ok := none[name]; ok {
			t.Errorf(`preset "none" sets %s`, name)
		}
	}
	for name, want := range map[string]any{
		"NoNewPrivileges": true, "PrivateTmp": true, "ProtectSystem": "full",
		"ProtectKernelTunables": true, "ProtectKernelModules": true, "ProtectKernelLogs": true,
		"ProtectControlGroups": true, "ProtectClock": true, "ProtectHostname": true,
		"RestrictSUIDSGID": true, "RestrictRealtime": true, "LockPersonality": true,
	} {
		if def[name] != want {
			t.Errorf("default: %s = %v, want %v", name, def[name], want)
		}
		if name != "ProtectSystem" && strict[name] != want {
			t.Errorf("strict: %s = %v, want %v", name, strict[name], want)
		}
	}
	if a, _ := def["SystemCallArchitectures"].([]string); len(a) != 1 || a[0] != "native" {
		t.Errorf("default: SystemCallArchitectures %v", def["SystemCallArchitectures"])
	}
	if f, _ := def["RestrictAddressFamilies"].(allowList); !f.Allow || strings.Join(f.List, " ") != "AF_UNIX AF_INET AF_INET6 AF_NETLINK" {
		t.Errorf("default: RestrictAddressFamilies %v", def["RestrictAddressFamilies"])
	}
	if f, _ := strict["RestrictAddressFamilies"].(allowList); !f.Allow || strings.Join(f.List, " ") != "AF_UNIX AF_INET AF_INET6" {
		t.Errorf("strict: RestrictAddressFamilies %v", strict["RestrictAddressFamilies"])
	}
	// A JIT needs W+X memory, Chromium namespaces, and an application may
	// live under /home and use a GPU.
	for _, name := range []string{"MemoryDenyWriteExecute", "ProtectHome", "PrivateDevices", "SystemCallFilter", "RemoveIPC", "RestrictNamespaces"} {
		if _, ok := def[name]; ok {
			t.Errorf("default sets %s", name)
		}
	}
	if _, ok := strict["MemoryDenyWriteExecute"]; ok {
		t.Error("strict sets MemoryDenyWriteExecute")
	}
	if strict["ProtectSystem"] != "strict" || strict["ProtectHome"] != "read-only" || strict["CapabilityBoundingSet"] != uint64(0) ||
		strict["RestrictNamespaces"] != uint64(0) || strict["UMask"] != uint32(0o027) || strict["ProtectProc"] != "invisible" {
		t.Errorf("strict: %v", strict)
	}
	if rw, _ := strict["ReadWritePaths"].([]string); len(rw) != 1 || rw[0] != "/srv/app" {
		t.Errorf("strict: ReadWritePaths %v, want the working directory", strict["ReadWritePaths"])
	}
	s := fullSpec("strict")
	s.WorkingDirectory = ""
	if _, ok := propMap(t, s)["ReadWritePaths"]; ok {
		t.Error("strict without a working directory sets ReadWritePaths")
	}
	for _, bad := range []string{"Strict", "full", " default"} {
		if _, err := fullSpec(bad).Properties(); err == nil || !strings.Contains(err.Error(), "hardening") {
			t.Errorf("preset %q: %v, want an error", bad, err)
		}
	}
}

func TestDescriptionRevision(t *testing.T) {
	if got := propMap(t, fullSpec(""))["Description"]; got != "flexiq-scaled worker email/3 rev 3f2a9c" {
		t.Errorf("Description %q", got)
	}
	s := fullSpec("")
	s.Revision = ""
	if got := propMap(t, s)["Description"]; got != "flexiq-scaled worker email/3" {
		t.Errorf("Description without a revision: %q", got)
	}
	for _, bad := range []string{"a b", "a\nb", "\t", "x\x00", strings.Repeat("a", maxRevision+1), "\xff"} {
		s.Revision = bad
		if _, err := s.Properties(); err == nil {
			t.Errorf("revision %q accepted", bad)
		}
	}
}

func TestParseRevision(t *testing.T) {
	for _, tc := range []struct{ desc, want string }{
		{"flexiq-scaled worker email/3 rev 3f2a9c", "3f2a9c"},
		{"flexiq-scaled worker email/3 rev sha256:ab-12_x.y", "sha256:ab-12_x.y"},
		{"flexiq-scaled worker email/3", ""},             // started without a revision
		{"flexiq-scaled worker email/3 rev ", ""},        // empty
		{"flexiq-scaled worker email/3 rev a b", ""},     // not one we wrote
		{"flexiq-scaled worker email/3 revision 1", ""},  // no marker
		{"flexiq-scaled worker email/3  rev 1", ""},      // ditto: two spaces
		{"flexiq-scaled worker a b rev 1", ""},           // POOL/SLOT has no spaces
		{"flexiq-scaled worker email/3 rev 1 rev 2", ""}, // the rest is one revision
		{"my worker email/3 rev 1", ""},                  // not a worker's
		{"", ""},                                         //
		{"flexiq-scaled worker email/3 rev " + strings.Repeat("a", maxRevision), strings.Repeat("a", maxRevision)},
	} {
		if got := ParseRevision(tc.desc); got != tc.want {
			t.Errorf("ParseRevision(%q) = %q, want %q", tc.desc, got, tc.want)
		}
	}
	// Round trip.
	for _, rev := range []string{"1", "3f2a9c", "v1.2.3+build.4"} {
		if got := ParseRevision(description("email", "3", rev)); got != rev {
			t.Errorf("ParseRevision(description(%q)) = %q", rev, got)
		}
	}
}
