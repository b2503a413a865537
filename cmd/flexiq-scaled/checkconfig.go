package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/hostcheck"
)

func cmdCheckConfig(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check-config", "[FILE]", `
Validate FILE (default `+config.DefaultPath+`) as the daemon would at start:
the file itself, and the drop-ins of conf.d beside it (*.toml, read in
lexical order, [pools.NAME] tables only; a pool defined twice is an error
naming both files); that the workers' users and groups exist on this system
(through NSS, as systemd looks them up); that each pool's command is where
systemd will look for it (an absolute path, or a name in systemd's fixed
search path) and executable; that no source path leads into a directory the
daemon's sandbox hides; that each password_file and url_file exists, is a
regular file and not a symbolic link, is owned by root and gives group and
others no access; that each service template is a regular file, not a link,
writable by root only (when run as root), renders a sample within 4 MiB and 2
seconds, and writes no other pool's output; and, when run as root, that only
root can write the file.

Warnings go to stderr as "warning: FILE: KEY: MESSAGE". Problems go to stderr
one per line as "FILE: KEY: MESSAGE", and the exit status is 1. A valid file
is printed to stdout as TOML with every default filled in, and the exit
status is 0.`)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	path := config.DefaultPath
	switch fs.NArg() {
	case 0:
	case 1:
		path = fs.Arg(0)
	default:
		return usageError(fs, stderr, "expected at most one FILE, got %d arguments", fs.NArg())
	}

	cfg, err := config.Load(path)
	var problems []string
	var cerr *config.Error
	switch {
	case errors.As(err, &cerr):
		for _, p := range cerr.Problems {
			problems = append(problems, p.String())
		}
	case err != nil:
		// The file could not be read at all; there is nothing more to check.
		return failf(stderr, "check-config", "%s: %v", path, err)
	default:
		problems = checkMachine(cfg, stderr)
	}
	// Checked even when the file has other problems, so that one run lists
	// everything that stops the daemon. It does nothing unless run as root,
	// just as the daemon only refuses the file when it runs as root.
	if err := hostcheck.CheckConfigSafety(path); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			problems = append(problems, line)
		}
	}

	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, p)
		}
		return exitFail
	}
	if err := config.WriteEffective(stdout, cfg); err != nil {
		return failf(stderr, "check-config", "%v", err)
	}
	return exitOK
}

// checkMachine checks what a loaded file asks of this machine (users and
// groups, commands, hidden paths, capacity, credential files): its
// warnings go to stderr, its problems come back.
func checkMachine(cfg *config.Config, stderr io.Writer) []string {
	var problems []string
	for _, w := range hostcheck.Warnings(cfg) {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	// The machine is checked only for a file that loaded: a
	// broken file has no trustworthy settings to check.
	userProblems, userWarnings := hostcheck.CheckUsersDetail(cfg)
	for _, w := range userWarnings {
		fmt.Fprintln(stderr, "warning: "+w.String())
	}
	// The daemon only warns about a command it cannot find (the
	// program may be deployed after the file); here it is an
	// error, as every worker start would fail.
	capProblems, capWarnings := config.CheckHostCapacity(cfg)
	for _, w := range capWarnings {
		fmt.Fprintln(stderr, "warning: "+w.String())
	}
	credProblems, credWarnings := hostcheck.CheckCredentials(cfg)
	for _, w := range append(credWarnings, hostcheck.CheckCPUSet(cfg)...) {
		fmt.Fprintln(stderr, "warning: "+w.String())
	}
	for _, check := range [][]config.Problem{userProblems, hostcheck.CheckExecutables(cfg), hostcheck.CheckPaths(cfg), capProblems, credProblems} {
		for _, p := range check {
			problems = append(problems, p.String())
		}
	}
	return problems
}
