package decide

import (
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func TestReloadWhy(t *testing.T) {
	base := config.PoolFleet{Capacity: 4, Fleet: config.Fleet{Conn: config.Conn{URL: "redis://a/0"}, HostID: "h", TTL: time.Second}}
	with := func(f func(*config.PoolFleet)) *config.Pool {
		pf := base
		f(&pf)
		return &config.Pool{Fleet: &pf}
	}
	old := &fleetLink{cfg: base}
	for _, tc := range []struct {
		cfg  *config.Pool
		want string
	}{
		{&config.Pool{}, "a reload took the pool out of the fleet"},
		{with(func(f *config.PoolFleet) { f.Conn.URL = "postgres://b/db" }), "a reload changed the fleet's store (nothing stopped)"},
		{with(func(f *config.PoolFleet) { f.Store = config.FleetStorePostgres }), "a reload changed the fleet's store (nothing stopped)"},
		{with(func(f *config.PoolFleet) { f.HostID = "g" }), "a reload changed the host's id in the fleet (nothing stopped)"},
		{with(func(f *config.PoolFleet) { f.TTL = 2 * time.Second }), "a reload changed the fleet's settings (nothing stopped)"},
	} {
		if got := reloadWhy(old, tc.cfg); got != tc.want {
			t.Errorf("reloadWhy(%+v) = %q, want %q", tc.cfg.Fleet, got, tc.want)
		}
	}
}
