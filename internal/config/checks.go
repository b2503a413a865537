package config

import (
	"maps"
	"slices"
	"strconv"

	"github.com/BurntSushi/toml"
)

// The checks of a configuration against the machine it runs on (its users,
// commands, files, credentials, cgroups) are internal/hostcheck's: Load
// leaves them out, so that check-config on a workstation, or a unit test,
// does not fail because the production user does not exist there.

// sortedPools returns the pools in name order, so that reports are stable.
func sortedPools(c *Config) []*Pool {
	pools := make([]*Pool, 0, len(c.Pools))
	for _, name := range slices.Sorted(maps.Keys(c.Pools)) {
		pools = append(pools, c.Pools[name])
	}
	return pools
}

// SortedPools returns the pools in name order, so that reports are stable.
func (c *Config) SortedPools() []*Pool { return sortedPools(c) }

func poolKey(p *Pool, fields ...string) string {
	return toml.Key(append([]string{"pools", p.Name}, fields...)).String()
}

// PoolKey is the dotted key of fields in pool p's table, as a Problem names
// it: pools.NAME.FIELD...
func PoolKey(p *Pool, fields ...string) string { return poolKey(p, fields...) }

// IsRootSpelling tells whether a user or group name is root's without
// asking NSS: "root", or 0 written as a number ("0", "00").
func IsRootSpelling(name string) bool {
	if name == "root" {
		return true
	}
	id, err := strconv.ParseUint(name, 10, 32)
	return err == nil && id == 0
}

// ForUserManager adapts the configuration to a user's service manager
// (`run --user`), which runs every unit as its own user and cannot switch to
// another: the default worker user is dropped, while a user written in the
// file is kept, for systemd to refuse loudly.
func (c *Config) ForUserManager() {
	for _, p := range c.Pools {
		if p.Service != nil && !p.UserExplicit && p.Service.Readiness.User == p.User {
			// The command probe's user was the default user.
			p.Service.Readiness.User = ""
		}
		if !p.UserExplicit {
			p.User, p.Group = "", ""
		}
	}
}
