package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fleetDir writes config.toml and its drop-ins (file name in conf.d →
// text) and a machine id (none when machineID is "-"), and loads them
// with the machine id's path pointed at the file written.
func fleetDir(t *testing.T, machineID, main string, dropIns map[string]string) (string, *Config, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(dropIns) > 0 {
		if err := os.Mkdir(DropInDir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		for name, text := range dropIns {
			if err := os.WriteFile(filepath.Join(DropInDir(path), name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	idPath := filepath.Join(dir, "machine-id")
	if machineID != "-" {
		if err := os.WriteFile(idPath, []byte(machineID), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	c, err := loadWithMachineID(path, idPath)
	return path, c, err
}

// loadWithMachineID is Load, with host_id defaulting from idPath.
func loadWithMachineID(path, idPath string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dropIns, err := readDropIns(DropInDir(path))
	if err != nil {
		return nil, err
	}
	return newLoader(path, idPath).parseAll(data, dropIns)
}

const (
	machineID  = "0123456789abcdef0123456789abcdef\n"
	fleetRedis = "[fleet]\nurl = \"redis://127.0.0.1:6379/0\"\n"
)

// joined is the test pool joining a fleet with extra lines in its fleet
// table.
func joined(extra string) string { return pool("") + "[pools.email.fleet]\n" + extra }

func TestFleetDefaults(t *testing.T) {
	_, c, err := fleetDir(t, machineID, fleetRedis+joined(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Fleet{Conn: Conn{URL: "redis://127.0.0.1:6379/0"}, Store: FleetStoreRedis, HostID: strings.TrimSpace(machineID),
		TTL: 15 * time.Second, Heartbeat: 3 * time.Second, Renew: 5 * time.Second, Hold: 30 * time.Second}
	if c.Fleet == nil || *c.Fleet != want {
		t.Errorf("[fleet] = %+v, want %+v", c.Fleet, want)
	}
	p := c.Pools["email"]
	if !p.Joins() || *p.Fleet != (PoolFleet{Fleet: want, CapacityAuto: true}) {
		t.Errorf("pool fleet = %+v, want %+v with capacity auto", p.Fleet, want)
	}
	// A pool that does not join has no fleet, [fleet] or not.
	_, c, err = fleetDir(t, "-", fleetRedis+pool(""), nil)
	if err != nil {
		t.Fatalf("a [fleet] that no pool joins, and no machine id: %v", err)
	}
	if c.Pools["email"].Joins() || c.Fleet == nil || c.Fleet.HostID != "" {
		t.Errorf("no pool joins: pool %+v, [fleet] %+v", c.Pools["email"].Fleet, c.Fleet)
	}
}

func TestFleetOverrides(t *testing.T) {
	daemon := "[fleet]\nurl = \"redis://127.0.0.1:6379/0\"\npassword_credential = \"fleet\"\nhost_id = \"web-1\"\nheartbeat_sec = 2\nhold_sec = 60\n"
	for _, tc := range []struct {
		name, text string
		want       PoolFleet
	}{
		{"[fleet]'s, and a capacity", daemon + joined("capacity = 6\n"), PoolFleet{Capacity: 6, Fleet: Fleet{
			Conn: Conn{URL: "redis://127.0.0.1:6379/0", PasswordCredential: "fleet"}, Store: FleetStoreRedis, HostID: "web-1",
			TTL: 15 * time.Second, Heartbeat: 2 * time.Second, Renew: 5 * time.Second, Hold: 60 * time.Second}}},
		// The connection is taken whole: [fleet]'s password is not
		// sent to another store. renew_sec follows the pool's ttl_sec.
		{"own store and ttl", daemon + joined("url = \"postgres://fleet@db.internal/q\"\npassword_file = \"/etc/fleet.pw\"\nttl_sec = 30\ncapacity = \"auto\"\n"),
			PoolFleet{CapacityAuto: true, Fleet: Fleet{
				Conn: Conn{URL: "postgres://fleet@db.internal/q", PasswordFile: "/etc/fleet.pw"}, Store: FleetStorePostgres, HostID: "web-1",
				TTL: 30 * time.Second, Heartbeat: 2 * time.Second, Renew: 10 * time.Second, Hold: 60 * time.Second}}},
		// A URL in a credential names its store when the daemon reads it.
		{"no [fleet], url in a credential", joined("url_credential = \"fleet-url\"\nrenew_sec = 1.5\n"), PoolFleet{CapacityAuto: true, Fleet: Fleet{
			Conn: Conn{URLCredential: "fleet-url"}, HostID: strings.TrimSpace(machineID),
			TTL: 15 * time.Second, Heartbeat: 3 * time.Second, Renew: 1500 * time.Millisecond, Hold: 30 * time.Second}}},
		{"a gang pool joins", daemon + joined("capacity = 2\n") + "[pools.email.service]\ngroup_size = 2\n", PoolFleet{Capacity: 2, Fleet: Fleet{
			Conn: Conn{URL: "redis://127.0.0.1:6379/0", PasswordCredential: "fleet"}, Store: FleetStoreRedis, HostID: "web-1",
			TTL: 15 * time.Second, Heartbeat: 2 * time.Second, Renew: 5 * time.Second, Hold: 60 * time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c, err := fleetDir(t, machineID, tc.text, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Pools["email"].Fleet; got == nil || *got != tc.want {
				t.Errorf("pool fleet\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
	// The daemon-level table keeps its own values whatever a pool sets.
	_, c, err := fleetDir(t, machineID, daemon+joined("ttl_sec = 30\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Fleet.TTL != 15*time.Second || c.Fleet.Renew != 5*time.Second {
		t.Errorf("[fleet] took the pool's ttl: %+v", c.Fleet)
	}
}

func TestFleetStore(t *testing.T) {
	for u, want := range map[string]string{"redis://h/0": FleetStoreRedis, "rediss://h": FleetStoreRedis,
		" postgres://h/db\n": FleetStorePostgres, "postgresql:///db?host=/run/postgresql": FleetStorePostgres, "http://h": ""} {
		got, err := FleetStore(u)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("FleetStore(%q) = %q, %v; want %q", u, got, err, want)
		}
	}
}

// Every problem names the file and the key, as the rest of the file's do.
func TestFleetProblems(t *testing.T) {
	rule := func(dir, when string) string {
		if dir == "scale_up" {
			return "policy = \"rules\"\n[[pools.email.scale_up]]\nwhen = \"" + when + "\"\n"
		}
		return "policy = \"rules\"\n[[pools.email.scale_up]]\nwhen = \"pending > 0\"\n[pools.email.scale_down]\nwhen = \"" + when + "\"\n"
	}
	withRule := func(r string) string {
		return fleetRedis + strings.Replace(pool(r), "[pools.email.source]", "[pools.email.fleet]\n[pools.email.source]", 1)
	}
	for _, tc := range []struct {
		name, machineID, text string
		want                  string // "KEY: part of the message"
	}{
		{"scheme", machineID, "[fleet]\nurl = \"http://127.0.0.1:6379\"\n" + joined(""), `fleet.url: scheme "http": want one of [redis rediss postgres postgresql]`},
		{"password in the url", machineID, "[fleet]\nurl = \"redis://u:hunter2@127.0.0.1:6379\"\n" + joined(""), "fleet.url: "},
		{"two urls", machineID, fleetRedis + "url_credential = \"x\"\n" + joined(""), "fleet.url: set only one of url, url_file and url_credential"},
		{"password without a url", machineID, "[fleet]\npassword_file = \"/etc/pw\"\n" + joined(""), "fleet.url: missing: set url, url_file or url_credential"},
		{"unknown key", machineID, fleetRedis + "ttl = 3\n" + joined(""), "fleet.ttl: unknown key (want url,"},
		{"ttl 0", machineID, fleetRedis + "ttl_sec = 0\n" + joined(""), "fleet.ttl_sec: must be > 0"},
		{"ttl not a number", machineID, fleetRedis + "ttl_sec = \"15s\"\n" + joined(""), "fleet.ttl_sec: "},
		{"hold negative", machineID, fleetRedis + "hold_sec = -1\n" + joined(""), "fleet.hold_sec: must be > 0"},
		{"heartbeat over ttl/2", machineID, fleetRedis + "heartbeat_sec = 8\n" + joined(""), "fleet.heartbeat_sec: heartbeat_sec (8) must be at most half of ttl_sec (15)"},
		{"ttl under 2 heartbeats", machineID, fleetRedis + "ttl_sec = 5\n" + joined(""), "fleet.ttl_sec: heartbeat_sec (3) must be at most half of ttl_sec (5)"},
		{"renew at ttl", machineID, fleetRedis + "renew_sec = 15\n" + joined(""), "fleet.renew_sec: renew_sec (15) is too long for ttl_sec (15)"},
		// Under the TTL, but its jitter and the tick take it past: 11 ×
		// 1.2 + 3 = 16.2 s.
		{"renew with jitter past ttl", machineID, fleetRedis + "renew_sec = 11\n" + joined(""),
			"fleet.renew_sec: renew_sec (11) is too long for ttl_sec (15): with its ±20 % jitter and up to a heartbeat_sec (3) until the step that renews, a renewal may come 16.2s after the last"},
		{"host_id", machineID, fleetRedis + "host_id = \"web 1\"\n" + joined(""), `fleet.host_id: "web 1": want 1 to 64 letters`},
		{"no machine id", "-", fleetRedis + joined(""), "fleet.host_id: cannot default to the machine id"},
		{"empty machine id", "\n", fleetRedis + joined(""), "fleet.host_id: cannot default to the machine id"},
		{"no machine id, no [fleet]", "-", joined("url = \"redis://127.0.0.1\"\n"), "fleet.host_id: cannot default to the machine id"},

		{"no store anywhere", machineID, joined(""), "pools.email.fleet: no coordination store: set url (or url_file, url_credential) in [fleet]"},
		{"no store in [fleet]", machineID, "[fleet]\nttl_sec = 20\n" + joined(""), "pools.email.fleet: no coordination store"},
		{"host_id in a pool", machineID, fleetRedis + joined("host_id = \"x\"\n"), "pools.email.fleet.host_id: only [fleet] sets host_id"},
		{"unknown pool key", machineID, fleetRedis + joined("capacity_auto = true\n"), "pools.email.fleet.capacity_auto: unknown key (want capacity,"},
		{"capacity 0", machineID, fleetRedis + joined("capacity = 0\n"), `pools.email.fleet.capacity: must be >= 1, or "auto"`},
		{"capacity a word", machineID, fleetRedis + joined("capacity = \"all\"\n"), `pools.email.fleet.capacity: "all": want a number of workers (>= 1) or "auto"`},
		{"capacity a fraction", machineID, fleetRedis + joined("capacity = 1.5\n"), "pools.email.fleet.capacity: "},
		{"pool scheme", machineID, joined("url = \"mysql://db\"\n"), `pools.email.fleet.url: scheme "mysql"`},
		{"pool ttl under [fleet]'s heartbeat", machineID, fleetRedis + "heartbeat_sec = 3\n" + joined("ttl_sec = 4\n"),
			"pools.email.fleet.ttl_sec: heartbeat_sec (3) must be at most half of ttl_sec (4)"},
		{"pool heartbeat", machineID, fleetRedis + joined("heartbeat_sec = 10\n"), "pools.email.fleet.heartbeat_sec: heartbeat_sec (10) must be at most half"},
		{"pool ttl under [fleet]'s renew", machineID, fleetRedis + "ttl_sec = 30\nrenew_sec = 10\n" + joined("ttl_sec = 9\n"),
			"pools.email.fleet.ttl_sec: renew_sec (10) is too long for ttl_sec (9)"},
		{"pool renew", machineID, fleetRedis + joined("renew_sec = 20\n"), "pools.email.fleet.renew_sec: renew_sec (20) is too long for ttl_sec (15)"},

		{"cpu target", machineID, withRule("target_cpu_utilisation = 0.7\n"), "pools.email.target_cpu_utilisation: not in a pool that joins a fleet: worker CPU is not coordinated across hosts"},
		{"host signal", machineID, withRule(rule("scale_up", "host_cpu < 0.5 && pending > 0")), "pools.email.scale_up[0].when: reads host_cpu, a signal of this host"},
		{"psi", machineID, withRule(rule("scale_down", "psi_memory > 10")), "pools.email.scale_down.when: reads psi_memory, a signal of this host"},
		{"worker cpu", machineID, withRule(rule("scale_down", "worker_cpu < 0.2")), "pools.email.scale_down.when: reads worker_cpu in a pool that joins a fleet: worker CPU is not coordinated across hosts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _, err := fleetDir(t, tc.machineID, tc.text, nil)
			if want := path + ": " + tc.want; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("got %v\nwant a problem containing %q", err, want)
			}
		})
	}
}

// Queue signals and a CPU target stay allowed outside fleets; within one,
// the rules that read the queue load.
func TestFleetRulesOnQueueSignals(t *testing.T) {
	text := fleetRedis + pool("policy = \"rules\"\n[[pools.email.scale_up]]\nwhen = \"pending > workers * 10\"\n[pools.email.scale_down]\nwhen = \"idle_sec > 60\"\n") +
		"[pools.email.fleet]\n"
	if _, _, err := fleetDir(t, machineID, text, nil); err != nil {
		t.Error(err)
	}
}

// A pool of a drop-in joins the fleet that config.toml's [fleet] names,
// and its problems name the drop-in; [fleet] belongs in config.toml.
func TestFleetDropIn(t *testing.T) {
	web := "[pools.web]\nexec = [\"/usr/bin/web\"]\n[pools.web.source]\npath = \"/var/lib/flexiq/flexiq.db\"\n[pools.web.fleet]\n"
	_, c, err := fleetDir(t, machineID, fleetRedis, map[string]string{"web.toml": web + "capacity = 3\n"})
	if err != nil {
		t.Fatal(err)
	}
	if f := c.Pools["web"].Fleet; f == nil || f.Capacity != 3 || f.Store != FleetStoreRedis || f.HostID == "" {
		t.Errorf("drop-in pool's fleet %+v", f)
	}
	path, _, err := fleetDir(t, machineID, fleetRedis, map[string]string{"web.toml": web + "capacity = 0\nttl_sec = 4\n"})
	dropIn := filepath.Join(DropInDir(path), "web.toml")
	for _, want := range []string{dropIn + ": pools.web.fleet.capacity: must be >= 1", dropIn + ": pools.web.fleet.ttl_sec: heartbeat_sec (3)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v\nwant %q", err, want)
		}
	}
	path, _, err = fleetDir(t, machineID, pool(""), map[string]string{"web.toml": web + "url = \"redis://h\"\n" + fleetRedis})
	if want := filepath.Join(DropInDir(path), "web.toml") + ": fleet: a drop-in holds [pools.NAME] tables only"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v\nwant %q", err, want)
	}
}

// The effective configuration writes both tables, and loads again into the
// same configuration.
func TestFleetEffectiveRoundTrip(t *testing.T) {
	for name, text := range map[string]string{
		"defaults":    fleetRedis + joined(""),
		"no pool":     "[fleet]\nttl_sec = 20\n" + pool(""),
		"overrides":   fleetRedis + "host_id = \"web-1\"\nheartbeat_sec = 1.5\npassword_file = \"/etc/fleet.pw\"\n" + joined("capacity = 7\nttl_sec = 10\nhold_sec = 45\n"),
		"own store":   fleetRedis + joined("url_file = \"/etc/fleet.url\"\nrenew_sec = 2.5\n"),
		"no [fleet]":  joined("url = \"postgres://fleet@127.0.0.1/q?sslmode=disable\"\npassword_credential = \"pg\"\n"),
		"thirds":      fleetRedis + "ttl_sec = 10\n" + joined(""),
		"gang, fleet": fleetRedis + joined("capacity = 2\n") + "[pools.email.service]\ngroup_size = 3\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, c, err := fleetDir(t, machineID, text, nil)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WriteEffective(&buf, c); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), "[fleet]") && c.Fleet != nil {
				t.Errorf("no [fleet] in\n%s", buf.String())
			}
			_, again, err := fleetDir(t, machineID, buf.String(), nil)
			if err != nil {
				t.Fatalf("reloading:\n%s\n%v", buf.String(), err)
			}
			if c.Fleet != nil && len(c.Pools) > 0 && c.Pools["email"].Joins() {
				// [fleet]'s host_id is written out: it loads
				// without the machine id.
				if _, _, err := fleetDir(t, "-", buf.String(), nil); err != nil {
					t.Errorf("reloading without a machine id: %v", err)
				}
			}
			if !reflect.DeepEqual(c.Fleet, again.Fleet) {
				t.Errorf("[fleet] %+v, reloaded %+v", c.Fleet, again.Fleet)
			}
			for name, p := range c.Pools {
				p.UserExplicit = true
				if d := Diff(p, again.Pools[name]); d != nil || !reflect.DeepEqual(p.Fleet, again.Pools[name].Fleet) {
					t.Errorf("pool %s differs in %q: %+v, reloaded %+v\n%s", name, d, p.Fleet, again.Pools[name].Fleet, buf.String())
				}
			}
		})
	}
}
