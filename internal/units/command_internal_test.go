package units

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

func TestCommandExitError(t *testing.T) {
	for _, tt := range []struct {
		result       string
		code, status int32
		want         string // "" for nil
	}{
		{"success", 1, 0, ""},
		{"exit-code", 1, 3, "exit status 3"},
		{"exit-code", 1, 203, "status 203/EXEC"},
		// systemd calls a service killed by SIGTERM a success; a command
		// killed so gave no answer.
		{"success", 2, 15, "killed by signal 15"},
		{"signal", 2, 9, "killed by signal 9"},
		{"core-dump", 3, 11, "killed by signal 11"},
		{"timeout", 1, 0, "unit result timeout"},
	} {
		err := commandExitError(tt.result, tt.code, tt.status)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s %d %d: %v, want %q", tt.result, tt.code, tt.status, err, tt.want)
		}
	}
}

// Arguments reach the command as written: systemd's $VAR expansion of
// ExecStart= is escaped.
func TestLiteralArgv(t *testing.T) {
	got := literalArgv([]string{"/q", "$HOME", "${X}", "a$$b", "plain"})
	if want := []string{"/q", "$$HOME", "$${X}", "a$$$$b", "plain"}; !slices.Equal(got, want) {
		t.Errorf("literalArgv = %q, want %q", got, want)
	}
}

func TestCommandProperties(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	props := map[string]any{}
	for _, p := range (&CommandRunner{pool: "email"}).properties([]string{"/q"}, []string{"A=1", "INVOCATION_ID=x"}, w, w, time.Minute) {
		if p.Name != "SystemCallFilter" {
			props[p.Name] = p.Value.Value()
		}
	}
	for name, want := range map[string]any{
		"Type": "exec", "AddRef": true, "CollectMode": "inactive-or-failed", "KillMode": "control-group",
		"RuntimeMaxUSec": uint64(time.Minute / time.Microsecond), "StandardOutputFileDescriptor": dbus.UnixFD(w.Fd()),
		"NoNewPrivileges": true, "ProtectSystem": "full", "CapabilityBoundingSet": uint64(3),
	} {
		if props[name] != want {
			t.Errorf("%s = %#v, want %#v", name, props[name], want)
		}
	}
	if env, _ := props["Environment"].([]string); !slices.Equal(env, []string{"A=1"}) {
		t.Errorf("Environment = %q", env)
	}
	if name := commandUnitName(CommandSource, "email"); !strings.HasPrefix(name, "flexiq-source-email-") || !strings.HasSuffix(name, ".service") {
		t.Errorf("unit name %q", name)
	} else if _, _, ok := ParseUnitName(name); ok {
		t.Errorf("%s parses as a worker's unit name", name)
	}
	// A pool's probes and after-change commands are named for what they
	// run, not as its source (they were flexiq-source-POOL-*).
	for kind, want := range map[string]string{CommandProbe: "flexiq-probe-web-", CommandHook: "flexiq-hook-web-"} {
		if name := commandUnitName(kind, "web"); !strings.HasPrefix(name, want) {
			t.Errorf("the %s unit is named %q, want %s…", kind, name, want)
		}
	}
	cr := (&Manager{}).CommandRunner("web")
	if cr.kind != CommandSource || cr.For(CommandProbe).As("nobody", "").kind != CommandProbe || cr.kind != CommandSource {
		t.Errorf("For: kinds %q, %q", cr.kind, cr.For(CommandProbe).kind)
	}
}

// A runner As a user sets User= and Group= on the command's unit, as a
// worker's get them; the daemon's own runner sets neither and so runs as
// root (issue 27: command probes ran as root whatever the pool's user).
func TestCommandPropertiesUser(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	daemons := &CommandRunner{pool: "web"}
	for _, tt := range []struct {
		name              string
		run               *CommandRunner
		wantUser, wantGrp any // nil: the property is left out
	}{
		{"the daemon's", daemons, nil, nil},
		{"the pool's user, its primary group", daemons.As("nobody", ""), "nobody", nil},
		{"the pool's user and group", daemons.As("app", "staff"), "app", "staff"},
		{"as the daemon again", daemons.As("app", "staff").As("", ""), nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			props := map[string]any{}
			n := map[string]int{}
			for _, p := range tt.run.properties([]string{"/q"}, nil, w, w, time.Minute) {
				props[p.Name] = p.Value.Value()
				n[p.Name]++
			}
			if props["User"] != tt.wantUser || props["Group"] != tt.wantGrp {
				t.Errorf("User=%#v Group=%#v, want %#v and %#v", props["User"], props["Group"], tt.wantUser, tt.wantGrp)
			}
			if n["User"] > 1 || n["Group"] > 1 {
				t.Errorf("User= set %d times, Group= %d times", n["User"], n["Group"])
			}
			// The sandbox stays whoever runs the command.
			if props["NoNewPrivileges"] != true || props["ProtectSystem"] != "full" {
				t.Errorf("the daemon's sandbox is gone: %#v", props)
			}
		})
	}
	if daemons.user != "" || daemons.group != "" {
		t.Errorf("As changed the runner it was called on: %+v", daemons)
	}
}
