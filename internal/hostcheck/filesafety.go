package hostcheck

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/safefile"
)

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

// CheckConfigSafety is CheckFileSafety for config.toml, its drop-in
// directory (whoever may add a file there may add a pool) and every
// drop-in in it.
func CheckConfigSafety(path string) error {
	return checkConfigSafety(path, os.Geteuid())
}

func checkConfigSafety(path string, euid int) error {
	var errs []error
	check := func(p string) {
		if err := checkFileSafety(p, euid); err != nil {
			// One line per file, "FILE: ...", as a Problem reads.
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	check(path)
	dir := config.DropInDir(path)
	if _, err := os.Stat(dir); err == nil {
		check(dir)
	}
	files, err := config.DropInFiles(dir)
	if err != nil {
		errs = append(errs, err)
	}
	for _, f := range files {
		check(f)
	}
	return errors.Join(errs...)
}
