package config

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/capacity"
)

// A reload reports what changed in both fleet tables: [fleet]'s keys for
// the daemon, and each joining pool's, which take [fleet]'s in.
func TestFleetDiff(t *testing.T) {
	base := fleetRedis + "host_id = \"h1\"\n"
	for _, tc := range []struct {
		name, old, new string
		pool, daemon   []string
	}{
		{"nothing", base + joined(""), base + joined(""), nil, nil},
		{"[fleet]'s ttl", base + joined(""), base + "ttl_sec = 30\n" + joined(""),
			[]string{"fleet.hold_sec", "fleet.renew_sec", "fleet.ttl_sec"}, []string{"fleet.hold_sec", "fleet.renew_sec", "fleet.ttl_sec"}},
		{"the pool's heartbeat", base + joined(""), base + joined("heartbeat_sec = 1\n"), []string{"fleet.heartbeat_sec"}, nil},
		{"capacity", base + joined("capacity = 3\n"), base + joined("capacity = 4\n"), []string{"fleet.capacity"}, nil},
		{"capacity auto", base + joined("capacity = 3\n"), base + joined(""), []string{"fleet.capacity"}, nil},
		{"store", base + joined(""), base + joined("url = \"postgres://db/q\"\n"), []string{"fleet.url"}, nil},
		{"password", base + joined(""), base + "password_file = \"/etc/pw\"\n" + joined(""), []string{"fleet.password_file"}, []string{"fleet.password_file"}},
		{"host id", base + joined(""), fleetRedis + "host_id = \"h2\"\n" + joined(""), []string{"fleet.host_id"}, []string{"fleet.host_id"}},
		{"joins", base + pool(""), base + joined(""), []string{"fleet"}, nil},
		{"leaves, [fleet] goes", base + joined(""), pool(""), []string{"fleet"}, []string{"fleet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, a, err := fleetDir(t, machineID, tc.old, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, b, err := fleetDir(t, machineID, tc.new, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := Diff(a.Pools["email"], b.Pools["email"]); !slices.Equal(got, tc.pool) {
				t.Errorf("Diff = %q, want %q", got, tc.pool)
			}
			if got := DiffFleet(a.Fleet, b.Fleet); !slices.Equal(got, tc.daemon) {
				t.Errorf("DiffFleet = %q, want %q", got, tc.daemon)
			}
		})
	}
}

// Every field of PoolFleet, when changed, is reported as a key of the
// fleet tables (host_id is [fleet]'s, which the pool takes in).
func TestDiffPoolFleetCoversEveryField(t *testing.T) {
	valid := map[string]bool{"fleet.host_id": true}
	for _, n := range poolFleetKeys.Names() {
		valid["fleet."+n] = true
	}
	paths := fieldPaths(reflect.TypeFor[PoolFleet]())
	for _, path := range paths {
		old, new := &Pool{Fleet: &PoolFleet{}}, &Pool{Fleet: &PoolFleet{}}
		setNonZero(t, reflect.ValueOf(new.Fleet).Elem().FieldByIndex(fieldIndex(reflect.TypeFor[PoolFleet](), path)), path)
		got := Diff(old, new)
		if path == "Fleet.Store" {
			// Derived from url, which reports the change.
			if got != nil {
				t.Errorf("changing PoolFleet.Store: Diff = %q, want nothing", got)
			}
			continue
		}
		if len(got) != 1 || !valid[got[0]] {
			t.Errorf("changing PoolFleet.%s: Diff = %q, want one key of the file", path, got)
		}
	}
	if len(paths) < 12 {
		t.Errorf("walked only %v", paths)
	}
}

// In a pool that joins a fleet, max_workers is the fleet's: the capacity
// check caps the pool's capacity on this host instead, and min_workers need
// not fit here.
func TestApplyCapacityFleet(t *testing.T) {
	defer func(old func() (capacity.Host, error)) { readHost = old }(readHost)
	host := capacity.Host{Cores: 4, Memory: 8 << 30}
	quota := "[pools.email.limits]\ncpu_quota = \"100%\"\n"
	for _, tc := range []struct {
		name, text   string
		hostErr      bool
		wantCapacity int
		capped       bool // a warning and a Capped for fleet.capacity
	}{
		{"auto: what fits", joined("") + quota, false, 4, false},
		{"auto: at most max_workers", pool("max_workers = 3\n") + "[pools.email.fleet]\n" + quota, false, 3, false},
		{"auto, no limits: max_workers", joined(""), false, 10, false},
		{"auto, host unknown: max_workers", joined("") + quota, true, 10, false},
		{"a number that fits", joined("capacity = 2\n") + quota, false, 2, false},
		{"a number above max_workers", joined("capacity = 40\n"), false, 40, false},
		{"a number above the fit", joined("capacity = 8\n") + quota, false, 4, true},
		{"min_workers of the fleet, above the fit", pool("min_workers = 6\nmax_workers = 12\n") +
			"[pools.email.fleet]\ncapacity = 4\n" + quota, false, 4, false},
		{"a gang pool: groups", joined("") + quota + "[pools.email.service]\ngroup_size = 2\n", false, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			readHost = func() (capacity.Host, error) {
				if tc.hostErr {
					return capacity.Host{}, errors.New("no /proc")
				}
				return host, nil
			}
			_, c, err := fleetDir(t, machineID, fleetRedis+tc.text, nil)
			if err != nil {
				t.Fatal(err)
			}
			p := c.Pools["email"]
			maxWorkers := p.MaxWorkers
			problems, warnings := CheckHostCapacity(c)
			if len(problems) > 0 {
				t.Errorf("problems %v", problems)
			}
			capped := ApplyCapacity(c)
			if p.MaxWorkers != maxWorkers {
				t.Errorf("max_workers capped from %d to %d: it is the fleet's", maxWorkers, p.MaxWorkers)
			}
			if p.Fleet.Capacity != tc.wantCapacity {
				t.Errorf("capacity %d, want %d", p.Fleet.Capacity, tc.wantCapacity)
			}
			if !tc.capped {
				if len(capped) > 0 || (len(warnings) > 0 && !tc.hostErr) {
					t.Errorf("capped %+v, warnings %v; want none", capped, warnings)
				}
				return
			}
			if len(capped) != 1 || capped[0].Key != "fleet.capacity" || capped[0].From != 8 || capped[0].To != 4 ||
				!strings.Contains(capped[0].Why, "fleet capacity") {
				t.Errorf("capped %+v, want fleet.capacity 8 → 4", capped)
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0].String(), "pools.email.fleet.capacity: 8 is above capacity (fleet capacity: only 4 workers fit") {
				t.Errorf("warnings %v", warnings)
			}
		})
	}
}
