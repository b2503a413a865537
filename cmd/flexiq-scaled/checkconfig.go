package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func cmdCheckConfig(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check-config", "[FILE]", `
Validate FILE (default `+config.DefaultPath+`) as the daemon would at start:
the file itself, that the workers' users and groups exist on this system and,
when run as root, that only root can write the file.

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
		for _, w := range config.Warnings(cfg) {
			fmt.Fprintln(stderr, "warning: "+w)
		}
		// Users are checked only on a file that loaded: a broken file
		// has no trustworthy user settings to check.
		for _, p := range config.CheckUsers(cfg) {
			problems = append(problems, p.String())
		}
	}
	// Checked even when the file has other problems, so that one run lists
	// everything that stops the daemon. It does nothing unless run as root,
	// just as the daemon only refuses the file when it runs as root.
	if err := config.CheckFileSafety(path); err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v", path, err))
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
