// Package hostcheck checks a configuration that config.Load accepted
// against the machine it is to run on: the workers' users and groups
// through NSS (nss.go, users.go, probeuser.go), their commands in systemd's
// search path (exec.go), source paths that lead into a directory the
// daemon's sandbox hides (hidden.go), credential files and systemd
// credentials (credentials.go), the cgroup cpuset controller (cpuset.go),
// who may write the configuration's files (filesafety.go), and the
// warnings that need a look at the disk (warnings.go).
//
// config stays free of these, so that check-config on a workstation, or a
// unit test, does not fail because the production user does not exist
// there. The daemon (at start and reload), check-config and `pool add` call
// CheckMachine, or the checks one by one, after Load.
package hostcheck

import "github.com/flexiq/flexiq-scaled/internal/config"

// CheckMachine is every check of the configuration against this machine,
// as the daemon makes them at start and on reload: problems refuse the
// configuration (users and groups that do not exist, source paths that lead
// into a directory the daemon's sandbox hides); warnings are logged (names
// NSS could not answer for, commands systemd would not find or could not
// execute, which may be deployed after the file; cpuset_split on a host
// without the cpuset controller, CheckCPUSet). check-config treats the
// commands as problems. A min_workers the host cannot hold is a problem, as
// is a credential file that is missing or unsafe (CheckCredentials).
func CheckMachine(c *config.Config) (problems, warnings []config.Problem) {
	problems, warnings = CheckUsersDetail(c)
	problems = append(problems, CheckPaths(c)...)
	credProblems, credWarnings := CheckCredentials(c)
	problems, warnings = append(problems, credProblems...), append(warnings, credWarnings...)
	warnings = append(warnings, CheckExecutables(c)...)
	warnings = append(warnings, CheckCPUSet(c)...)
	// Capped max_workers are the daemon's to log, as capacity-capped
	// events (config.ApplyCapacity); check-config prints them as warnings.
	capProblems, _ := config.CheckHostCapacity(c)
	problems = append(problems, capProblems...)
	return problems, warnings
}
