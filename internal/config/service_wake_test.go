package config

import (
	"strings"
	"testing"
	"time"
)

// The [pools.NAME.service.wake] table (issue 29): its keys, and the
// problems each names with its key.
func TestServiceWake(t *testing.T) {
	wake := func(body string) string { return svc(webPorts + "[pools.email.service.wake]\n" + body + "\n") }
	web := func(body string) string {
		return "[pools.web]\nexec = [\"/bin/web\"]\nmax_workers = 4\n[pools.web.source]\npath = \"/var/lib/w.db\"\n" + body
	}
	for _, tc := range []struct {
		name, text string
		want       Wake   // when no problem is expected
		problem    string // a substring of the error, with the key
	}{
		{name: "defaults", text: wake(`listen = "127.0.0.1:18080"`),
			want: Wake{Listen: "127.0.0.1:18080", Port: "http", Mode: WakeHold, HoldTimeout: 60 * time.Second}},
		{name: "every key", text: wake("listen = \"[::1]:9000\"\nmode = \"reject\"\nhold_timeout_sec = 2.5"),
			want: Wake{Listen: "[::1]:9000", Port: "http", Mode: WakeReject, HoldTimeout: 2500 * time.Millisecond}},
		{name: "no table", text: svc("[pools.email.service]\n"), want: Wake{}},
		{name: "listen missing", text: wake(`mode = "hold"`), problem: "pools.email.service.wake.listen: missing"},
		{name: "listen not an address", text: wake(`listen = "localhost:80"`), problem: `pools.email.service.wake.listen: "localhost:80" is not an IP address and port`},
		{name: "listen without port", text: wake(`listen = "127.0.0.1"`), problem: "pools.email.service.wake.listen: \"127.0.0.1\" is not an IP address and port"},
		{name: "port 0", text: wake(`listen = "127.0.0.1:0"`), problem: "pools.email.service.wake.listen: \"127.0.0.1:0\": port 0"},
		{name: "listen a number", text: wake(`listen = 8080`), problem: "pools.email.service.wake.listen"},
		{name: "port named", text: svc("[pools.email.service.ports]\nhttp = \"auto\"\nmetrics = \"auto\"\n[pools.email.service.wake]\nlisten = \"127.0.0.1:18080\"\nport = \"http\"\n"),
			want: Wake{Listen: "127.0.0.1:18080", Port: "http", Mode: WakeHold, HoldTimeout: DefaultHoldTimeout}},
		{name: "port needed", text: svc("[pools.email.service.ports]\nhttp = \"auto\"\nmetrics = \"auto\"\n[pools.email.service.wake]\nlisten = \"127.0.0.1:18080\"\n"),
			problem: "pools.email.service.wake.port: missing: the pool declares several ports (http, metrics)"},
		{name: "port undeclared", text: wake("listen = \"127.0.0.1:18080\"\nport = \"grpc\""), problem: `pools.email.service.wake.port: "grpc" is not declared in [pools.email.service.ports]`},
		{name: "no port at all", text: svc("[pools.email.service.wake]\nlisten = \"127.0.0.1:18080\"\n"),
			problem: "pools.email.service.wake: held connections are forwarded to a port of the replicas, and the pool declares none"},
		{name: "bad mode", text: wake("listen = \"127.0.0.1:18080\"\nmode = \"queue\""), problem: `pools.email.service.wake.mode: "queue": want "hold"`},
		{name: "hold timeout 0", text: wake("listen = \"127.0.0.1:18080\"\nhold_timeout_sec = 0"), problem: "pools.email.service.wake.hold_timeout_sec: must be > 0"},
		{name: "unknown key", text: wake("listen = \"127.0.0.1:18080\"\nhost = 3"), problem: "pools.email.service.wake.host: unknown key"},
		{name: "wake on a queue pool", text: pool("") + "[pools.email.wake]\nlisten = \"127.0.0.1:18080\"\n",
			problem: "pools.email.wake: a wake address is for a service pool, and this pool has no [pools.email.service] table"},
		{name: "wake beside the service table", text: svc("[pools.email.service]\n[pools.email.wake]\nlisten = \"127.0.0.1:18080\"\n"),
			problem: "pools.email.wake: write the wake address as [pools.email.service.wake]"},
		{name: "another pool's wake port", text: wake(`listen = "127.0.0.1:18080"`) + web("[pools.web.service.ports]\nhttp = \"auto\"\n[pools.web.service.wake]\nlisten = \"127.0.0.2:18080\"\n"),
			problem: "pools.web.service.wake.listen: port 18080 is also the port of pools.email.service.wake.listen"},
		{name: "another pool's fixed range", text: wake(`listen = "127.0.0.1:8003"`) + web("[pools.web.service.ports]\nhttp = 8001\n"),
			problem: "pools.email.service.wake.listen: port 8003 is also in the fixed range 8001-8004 of pools.web.service.ports.http"},
		{name: "own fixed range", text: svc("[pools.email.service.ports]\nhttp = 18079\n[pools.email.service.wake]\nlisten = \"127.0.0.1:18080\"\n"),
			problem: "pools.email.service.wake.listen: port 18080 is also in the fixed range 18079-"},
		{name: "beside a fixed range", text: wake(`listen = "127.0.0.1:8005"`) + web("[pools.web.service.ports]\nhttp = 8001\n"),
			want: Wake{Listen: "127.0.0.1:8005", Port: "http", Mode: WakeHold, HoldTimeout: DefaultHoldTimeout}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.text)
			c, err := Load(path)
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), path+": "+tc.problem) {
					t.Fatalf("got %v, want a problem %q in %s", err, tc.problem, path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Pools["email"].Service.Wake; got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A wake address survives the effective configuration's round trip, and a
// change of it is a change Diff names.
func TestServiceWakeEffectiveAndDiff(t *testing.T) {
	text := svc(webPorts + "[pools.email.service.wake]\nlisten = \"127.0.0.1:18080\"\nmode = \"reject\"\nhold_timeout_sec = 7\n")
	c, err := load(t, text)
	if err != nil {
		t.Fatal(err)
	}
	back, _ := reloadEffective(t, c)
	if got, want := back.Pools["email"].Service.Wake, c.Pools["email"].Service.Wake; got != want {
		t.Errorf("round trip: got %+v, want %+v", got, want)
	}
	c2, err := load(t, strings.Replace(text, "hold_timeout_sec = 7", "hold_timeout_sec = 8", 1))
	if err != nil {
		t.Fatal(err)
	}
	if keys := Diff(c.Pools["email"], c2.Pools["email"]); !strings.Contains(strings.Join(keys, " "), "service.wake.hold_timeout_sec") {
		t.Errorf("Diff = %v, want service.wake.hold_timeout_sec", keys)
	}
}

// min_workers above 0 with a wake address is a warning, not an error.
func TestServiceWakeWarning(t *testing.T) {
	for _, tc := range []struct {
		min  int
		want bool
	}{{0, false}, {1, true}} {
		c, err := load(t, pool("min_workers = "+string(rune('0'+tc.min)))+webPorts+"[pools.email.service.wake]\nlisten = \"127.0.0.1:18080\"\n")
		if err != nil {
			t.Fatal(err)
		}
		ws := WakeWarnings(c)
		if got := len(ws) == 1 && strings.Contains(ws[0].String(), "pools.email.service.wake: min_workers = 1"); got != tc.want {
			t.Errorf("min_workers = %d: warnings %v, want one: %v", tc.min, ws, tc.want)
		}
	}
}
