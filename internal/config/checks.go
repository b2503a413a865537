package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/user"
	"slices"
	"strings"
	"syscall"

	"github.com/BurntSushi/toml"
)

// These checks depend on the machine rather than on the file, so Load leaves
// them out: check-config on a workstation, or a unit test, should not fail
// because the production user does not exist there.

// sortedPools returns the pools in name order, so that reports are stable.
func sortedPools(c *Config) []*Pool {
	pools := make([]*Pool, 0, len(c.Pools))
	for _, name := range slices.Sorted(maps.Keys(c.Pools)) {
		pools = append(pools, c.Pools[name])
	}
	return pools
}

func poolKey(p *Pool, fields ...string) string {
	return toml.Key(append([]string{"pools", p.Name}, fields...)).String()
}

// CheckUsers reports worker users and groups that do not exist on this
// system; systemd would otherwise fail every worker start with a terse
// status=217/USER.
func CheckUsers(c *Config) []Problem {
	var problems []Problem
	add := func(p *Pool, field, format string, args ...any) {
		problems = append(problems, Problem{File: c.Path, Key: poolKey(p, field), Msg: fmt.Sprintf(format, args...)})
	}
	for _, p := range sortedPools(c) {
		if p.User == "" {
			continue // a user manager's workers run as its own user
		}
		if _, err := user.Lookup(p.User); err != nil {
			var unknown user.UnknownUserError
			if errors.As(err, &unknown) {
				add(p, "user", "user %q does not exist on this system", p.User)
			} else {
				add(p, "user", "look up user %q: %v", p.User, err)
			}
		}
		if _, err := user.LookupGroup(p.Group); err != nil {
			var unknown user.UnknownGroupError
			switch {
			case !errors.As(err, &unknown):
				add(p, "group", "look up group %q: %v", p.Group, err)
			case p.Group == p.User:
				add(p, "group", "group %q (the default: same as user) does not exist on this system", p.Group)
			default:
				add(p, "group", "group %q does not exist on this system", p.Group)
			}
		}
	}
	return problems
}

// CheckFileSafety refuses, when running as root, a configuration file that
// anyone but root could have written: the file names commands and the users
// they run as, so writing it is as good as having root.
func CheckFileSafety(path string) error {
	return checkFileSafety(path, os.Geteuid())
}

func checkFileSafety(path string, euid int) error {
	if euid != 0 {
		// An unprivileged daemon can only start workers as itself; the
		// file grants nothing its writer does not already have.
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("check config file safety: %w", err)
	}
	var faults []string
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		faults = append(faults, fmt.Sprintf("is writable by group or others (mode %04o)", perm))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
		faults = append(faults, fmt.Sprintf("is owned by uid %d, not root", st.Uid))
	}
	if len(faults) == 0 {
		return nil
	}
	return fmt.Errorf("refusing config %s: it %s, and it names commands that will run on this system; "+
		"make it root-owned and not group- or world-writable (chown root: %s; chmod go-w %s)",
		path, strings.Join(faults, " and "), path, path)
}

// Warnings are things worth telling the operator that do not stop the
// daemon, each formatted as "<file>: <key>: <msg>".
func Warnings(c *Config) []string {
	var warnings []string
	add := func(key, format string, args ...any) {
		pr := Problem{File: c.Path, Key: key, Msg: fmt.Sprintf(format, args...)}
		warnings = append(warnings, pr.String())
	}
	for _, p := range sortedPools(c) {
		if _, err := os.Stat(p.Source.Path); errors.Is(err, fs.ErrNotExist) {
			add(poolKey(p, "source", "path"), "%s does not exist yet; the pool holds at its current size until it appears", p.Source.Path)
		}
		if p.User == "root" {
			add(poolKey(p, "user"), "workers run as root")
		}
		if p.DrainTimeout == 0 {
			add(poolKey(p, "drain_timeout_sec"), "0 means no stop timeout: systemd never kills a worker that does not drain")
		}
	}
	return warnings
}

// ForUserManager adapts the configuration to a user's service manager
// (`run --user`), which runs every unit as its own user and cannot switch to
// another: the default worker user is dropped, while a user written in the
// file is kept, for systemd to refuse loudly.
func (c *Config) ForUserManager() {
	for _, p := range c.Pools {
		if !p.UserExplicit {
			p.User, p.Group = "", ""
		}
	}
}
