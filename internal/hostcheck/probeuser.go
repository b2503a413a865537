package hostcheck

import (
	"fmt"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// The user a service pool's command readiness probe runs as (issue 27):
// the workers' unless [pools.NAME.service.readiness] user names another.
// config.Pool.ProbeAccount is what its unit gets.

// probeUser is readiness.user when it names another user than the pool's
// workers run as, else "": the pool's user is checked as the pool's.
func probeUser(p *config.Pool) string {
	if p.Service == nil || p.Service.Readiness.Kind != config.ReadyCommand || p.Service.Readiness.User == p.User {
		return ""
	}
	return p.Service.Readiness.User
}

// rootProbeWarning is the warning for a command probe that runs as root
// (isRoot says whether user is root's) while the workers run as another
// user; "" for any other probe.
func rootProbeWarning(p *config.Pool, user string, isRoot bool) string {
	if user == "" || !isRoot || p.User == "" || config.IsRootSpelling(p.User) {
		return ""
	}
	return fmt.Sprintf("the command probe runs as root (uid 0) while the workers run as %q: it may do all that root may; "+
		"leave user out to run it as %q", p.User, p.User)
}

// checkProbeUser checks readiness.user against this machine, as
// checkUsers checks the pool's user: a user NSS does not know is a
// problem (systemd would fail every probe with status=217/USER), one that
// resolves to uid 0 under another name ("toor") is warned about as root
// written out is (Warnings).
func checkProbeUser(c *config.Config, p *config.Pool, lookup lookupFunc, problems, warnings []config.Problem) ([]config.Problem, []config.Problem) {
	u := probeUser(p)
	if u == "" || config.IsRootSpelling(u) {
		return problems, warnings
	}
	pr := config.Problem{File: c.FileOf(p.Name), Key: config.PoolKey(p, "service", "readiness", "user")}
	a, err := lookup(dbPasswd, u)
	switch {
	case err != nil:
		pr.Msg = fmt.Sprintf("cannot check that user %q exists (%v); systemd will judge at each probe", u, err)
		return problems, append(warnings, pr)
	case !a.found:
		pr.Msg = fmt.Sprintf("user %q does not exist on this system (looked up through NSS, as systemd does): every command probe would fail", u)
		return append(problems, pr), warnings
	}
	_, numeric := numericID(u)
	if w := rootProbeWarning(p, u, !numeric && a.known && a.id == 0); w != "" {
		pr.Msg = fmt.Sprintf("user %q is uid 0: %s", u, w)
		warnings = append(warnings, pr)
	}
	return problems, warnings
}
