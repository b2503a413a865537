package hostcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// Warnings are things worth telling the operator that do not stop the
// daemon, each formatted as "<file>: <key>: <msg>". They include
// SecretWarnings.
func Warnings(c *config.Config) []string {
	var warnings []string
	for _, p := range c.SortedPools() {
		add := func(key, format string, args ...any) {
			pr := config.Problem{File: c.FileOf(p.Name), Key: key, Msg: fmt.Sprintf(format, args...)}
			warnings = append(warnings, pr.String())
		}
		if key, path, ok := localFile(p.Source); ok {
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				add(config.PoolKey(p, "source", key), "%s does not exist yet; the pool holds at its current size until it appears", path)
			}
		}
		// Root's in any spelling ("root", "0"); names that resolve to 0
		// through NSS are checkUsers' to warn about.
		if p.User != "" && config.IsRootSpelling(p.User) {
			add(config.PoolKey(p, "user"), "workers run as root (uid 0)")
		}
		if p.Group != "" && config.IsRootSpelling(p.Group) {
			add(config.PoolKey(p, "group"), "workers run with group root (gid 0)")
		}
		if u := probeUser(p); config.IsRootSpelling(u) {
			if w := rootProbeWarning(p, u, true); w != "" {
				add(config.PoolKey(p, "service", "readiness", "user"), "%s", w)
			}
		}
		if p.DrainTimeout == 0 {
			add(config.PoolKey(p, "drain_timeout_sec"), "0 means no stop timeout: systemd never kills a worker that does not drain")
		}
	}
	for _, pr := range config.WakeWarnings(c) {
		warnings = append(warnings, pr.String())
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
func SecretWarnings(c *config.Config) []config.Problem {
	var problems []config.Problem
	for _, p := range c.SortedPools() {
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
			problems = append(problems, config.Problem{File: file, Key: config.PoolKey(p, "environment", name),
				Msg: fmt.Sprintf("%s, and this file is world-readable (mode %04o): move it to an environment_file "+
					"readable only by root (systemd reads it before dropping privileges), or chmod 0640 %s",
					why, fi.Mode().Perm(), file)})
		}
	}
	return problems
}
