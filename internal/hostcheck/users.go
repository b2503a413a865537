package hostcheck

import (
	"fmt"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// CheckUsers reports worker users and groups that do not exist on this
// system; systemd would otherwise fail every worker start with a terse
// status=217/USER or 216/GROUP. Names are resolved through NSS, as systemd
// resolves them, and a name that cannot be checked is not refused.
func CheckUsers(c *config.Config) []config.Problem {
	problems, _ := checkUsers(c, nssLookup)
	return problems
}

// CheckUsersDetail is CheckUsers, plus the names that could not be checked
// (NSS failed or timed out), as warnings: systemd will judge them at start.
func CheckUsersDetail(c *config.Config) (problems, warnings []config.Problem) {
	return checkUsers(c, nssLookup)
}

func checkUsers(c *config.Config, lookup lookupFunc) (problems, warnings []config.Problem) {
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
	for _, p := range c.SortedPools() {
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
			pr := config.Problem{File: c.FileOf(p.Name), Key: config.PoolKey(p, id.field)}
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
			userAccount.gid == 0 && userAccount.id != 0 && !config.IsRootSpelling(p.User) {
			warnings = append(warnings, config.Problem{File: c.FileOf(p.Name), Key: config.PoolKey(p, "user"),
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
func checkRootID(p *config.Pool, field, name string, a account) (problem, warning string) {
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
	case config.IsRootSpelling(name):
		return "", ""
	}
	return "", fmt.Sprintf("%s %q is %s", field, name, what)
}
