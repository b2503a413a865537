package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/flexiq/flexiq-scaled/internal/safefile"
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
// status=217/USER or 216/GROUP. Names are resolved through NSS, as systemd
// resolves them, and a name that cannot be checked is not refused.
func CheckUsers(c *Config) []Problem {
	problems, _ := checkUsers(c, nssLookup)
	return problems
}

// CheckUsersDetail is CheckUsers, plus the names that could not be checked
// (NSS failed or timed out), as warnings: systemd will judge them at start.
func CheckUsersDetail(c *Config) (problems, warnings []Problem) {
	return checkUsers(c, nssLookup)
}

// CheckMachine is every check of the configuration against this machine,
// as the daemon makes them at start and on reload: problems refuse the
// configuration (users and groups that do not exist, source paths that lead
// into a directory the daemon's sandbox hides); warnings are logged (names
// NSS could not answer for, commands systemd would not find or could not
// execute, which may be deployed after the file; cpuset_split on a host
// without the cpuset controller, CheckCPUSet). check-config treats the
// commands as problems. A min_workers the host cannot hold is a problem, as
// is a credential file that is missing or unsafe (CheckCredentials).
func CheckMachine(c *Config) (problems, warnings []Problem) {
	problems, warnings = CheckUsersDetail(c)
	problems = append(problems, CheckPaths(c)...)
	credProblems, credWarnings := CheckCredentials(c)
	problems, warnings = append(problems, credProblems...), append(warnings, credWarnings...)
	warnings = append(warnings, CheckExecutables(c)...)
	warnings = append(warnings, CheckCPUSet(c)...)
	// Capped max_workers are the daemon's to log, as capacity-capped
	// events (ApplyCapacity); check-config prints them as warnings.
	capProblems, _ := CheckHostCapacity(c)
	problems = append(problems, capProblems...)
	return problems, warnings
}

func checkUsers(c *Config, lookup lookupFunc) (problems, warnings []Problem) {
	// Pools mostly share their users, and each lookup runs getent: ask
	// once per name.
	type answer struct {
		a   account
		err error
	}
	answers := map[string]answer{}
	lookupOnce := func(db, name string) (account, error) {
		k := db + ":" + name
		a, ok := answers[k]
		if !ok {
			a.a, a.err = lookup(db, name)
			answers[k] = a
		}
		return a.a, a.err
	}
	for _, p := range sortedPools(c) {
		var userAccount account
		for _, id := range []struct{ field, db, name string }{
			{"user", dbPasswd, p.User},
			// An empty group is the user's primary group, which
			// systemd takes from the user's record whatever it is.
			{"group", dbGroup, p.Group},
		} {
			if id.name == "" {
				continue // a user manager's workers run as its own user
			}
			a, err := lookupOnce(id.db, id.name)
			pr := Problem{File: c.FileOf(p.Name), Key: poolKey(p, id.field)}
			switch {
			case err != nil:
				pr.Msg = fmt.Sprintf("cannot check that %s %q exists (%v); systemd will judge at each worker start", id.field, id.name, err)
				warnings = append(warnings, pr)
			case !a.found:
				pr.Msg = fmt.Sprintf("%s %q does not exist on this system (looked up through NSS, as systemd does)", id.field, id.name)
				problems = append(problems, pr)
			}
			if id.db == dbPasswd {
				userAccount = a
			}
			rp, rw := checkRootID(p, id.field, id.name, a)
			if rp != "" {
				pr.Msg = rp
				problems = append(problems, pr)
			}
			if rw != "" {
				pr.Msg = rw
				warnings = append(warnings, pr)
			}
		}
		problems, warnings = checkProbeUser(c, p, lookupOnce, problems, warnings)
		// Group unset: the workers take the user's primary group, which
		// may be root's although the user is not.
		if p.Group == "" && p.User != "" && userAccount.found && userAccount.known &&
			userAccount.gid == 0 && userAccount.id != 0 && !isRootSpelling(p.User) {
			warnings = append(warnings, Problem{File: c.FileOf(p.Name), Key: poolKey(p, "user"),
				Msg: fmt.Sprintf("the primary group of user %q is gid 0 (root): workers run with group root; set group to another", p.User)})
		}
	}
	return problems, warnings
}

// checkRootID applies the rule on root to one user or group name as it
// resolves: workers get uid 0 or gid 0 only when it is written out, and
// are warned about then. A name that is root's by its spelling ("root",
// "0") is warned about by Warnings, which needs no NSS; here are the names
// that resolve to 0 through NSS (an alias such as "toor"), and a default
// user that does, which is refused. A numeric name is its ID, as systemd
// reads it, whatever NSS says.
func checkRootID(p *Pool, field, name string, a account) (problem, warning string) {
	id, numeric := numericID(name)
	switch {
	case numeric:
	case a.found && a.known:
		id = a.id
	default:
		return "", ""
	}
	if id != 0 {
		return "", ""
	}
	what := "uid 0 (root): workers run as root"
	if field == "group" {
		what = "gid 0 (root): workers run with group root"
	}
	switch {
	case field == "user" && !p.UserExplicit:
		return fmt.Sprintf("the default user %q is %s, which only a user written out in the file may be", name, what), ""
	case isRootSpelling(name):
		return "", ""
	}
	return "", fmt.Sprintf("%s %q is %s", field, name, what)
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
	faults := safefile.WriteFaults(fi, euid)
	if len(faults) == 0 {
		return nil
	}
	return fmt.Errorf("refusing config %s: it %s, and it names commands that will run on this system; "+
		"make it root-owned and not group- or world-writable (chown root: %s; chmod go-w %s)",
		path, strings.Join(faults, " and "), path, path)
}

// Warnings are things worth telling the operator that do not stop the
// daemon, each formatted as "<file>: <key>: <msg>". They include
// SecretWarnings.
func Warnings(c *Config) []string {
	var warnings []string
	for _, p := range sortedPools(c) {
		add := func(key, format string, args ...any) {
			pr := Problem{File: c.FileOf(p.Name), Key: key, Msg: fmt.Sprintf(format, args...)}
			warnings = append(warnings, pr.String())
		}
		if key, path, ok := localFile(p.Source); ok {
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				add(poolKey(p, "source", key), "%s does not exist yet; the pool holds at its current size until it appears", path)
			}
		}
		// Root's in any spelling ("root", "0"); names that resolve to 0
		// through NSS are checkUsers' to warn about.
		if p.User != "" && isRootSpelling(p.User) {
			add(poolKey(p, "user"), "workers run as root (uid 0)")
		}
		if p.Group != "" && isRootSpelling(p.Group) {
			add(poolKey(p, "group"), "workers run with group root (gid 0)")
		}
		if u := p.probeUser(); isRootSpelling(u) {
			if w := rootProbeWarning(p, u, true); w != "" {
				add(poolKey(p, "service", "readiness", "user"), "%s", w)
			}
		}
		if p.DrainTimeout == 0 {
			add(poolKey(p, "drain_timeout_sec"), "0 means no stop timeout: systemd never kills a worker that does not drain")
		}
	}
	for _, pr := range SecretWarnings(c) {
		warnings = append(warnings, pr.String())
	}
	return warnings
}

// secretNameParts are parts of environment variable names that usually
// carry credentials.
var secretNameParts = []string{"PASSWORD", "PASSWD", "SECRET", "TOKEN", "API_KEY", "APIKEY", "PRIVATE_KEY", "CREDENTIAL"}

// urlPasswordRE matches a URL with a password in it, as in
// postgres://app:hunter2@db/app.
var urlPasswordRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*:[^/?#@\s]*@`)

// SecretWarnings reports environment values that look like credentials in a
// configuration file (config.toml or a drop-in) that anyone on the machine
// may read. A file that cannot be stat'ed is not judged.
func SecretWarnings(c *Config) []Problem {
	var problems []Problem
	for _, p := range sortedPools(c) {
		file := c.FileOf(p.Name)
		fi, err := os.Stat(file)
		if err != nil || fi.Mode().Perm()&0o004 == 0 {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(p.Environment)) {
			why := ""
			upper := strings.ToUpper(name)
			for _, part := range secretNameParts {
				if strings.Contains(upper, part) {
					why = "its name looks like a secret's"
					break
				}
			}
			if why == "" && urlPasswordRE.MatchString(p.Environment[name]) {
				why = "its value is a URL with a password"
			}
			if why == "" {
				continue
			}
			problems = append(problems, Problem{File: file, Key: poolKey(p, "environment", name),
				Msg: fmt.Sprintf("%s, and this file is world-readable (mode %04o): move it to an environment_file "+
					"readable only by root (systemd reads it before dropping privileges), or chmod 0640 %s",
					why, fi.Mode().Perm(), file)})
		}
	}
	return problems
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
