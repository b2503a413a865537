package hostcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"golang.org/x/sys/unix"
)

// systemdSearchPath is where systemd looks up an ExecStart= command that is
// not an absolute path: a list fixed when systemd is built, the output of
// `systemd-path search-binaries-default` (systemd 252 on Debian). The
// PATH of the unit's environment is not used (systemd.service(5), "Command
// lines"), and neither is the daemon's own.
var systemdSearchPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// CheckExecutables resolves each pool's command (exec[0], or the app
// shortcut's "flexiq") as systemd will at every worker start, and reports
// one it cannot find or execute: systemd would fail every start with
// status=203/EXEC. check-config treats these as errors; the daemon logs them
// as warnings, since the file may be deployed before the program.
func CheckExecutables(c *config.Config) []config.Problem {
	return checkExecutables(c, systemdSearchPath, hiddenFromUs)
}

func checkExecutables(c *config.Config, searchPath []string, hidden func(dir string) bool) []config.Problem {
	var problems []config.Problem
	for _, p := range c.SortedPools() {
		if len(p.Exec) == 0 {
			continue
		}
		key := "exec"
		if p.App != "" {
			key = "app"
		}
		if msg := execProblem(p, searchPath, hidden); msg != "" {
			problems = append(problems, config.Problem{File: c.FileOf(p.Name), Key: config.PoolKey(p, key), Msg: msg})
		}
	}
	return problems
}

func execProblem(p *config.Pool, searchPath []string, hidden func(dir string) bool) string {
	cmd := p.Exec[0]
	if filepath.IsAbs(cmd) {
		err := checkExecutable(cmd)
		if err == nil {
			return ""
		}
		if dir, _, ok := config.HiddenBy(filepath.Clean(cmd)); ok && errors.Is(err, fs.ErrNotExist) && hidden(dir) {
			// This is the daemon, whose sandbox hides h.dir; the
			// workers do not run in it and may well see the file.
			return ""
		}
		return fmt.Sprintf("%s: %v; systemd would fail every worker start with status=203/EXEC", cmd, err)
	}
	var notExec []string
	for _, dir := range searchPath {
		cand := filepath.Join(dir, cmd)
		err := checkExecutable(cand)
		if err == nil {
			return ""
		}
		if !errors.Is(err, fs.ErrNotExist) {
			notExec = append(notExec, fmt.Sprintf("%s: %v", cand, err))
		}
	}
	msg := fmt.Sprintf("%q is not an absolute path, so systemd looks it up in its fixed search path (%s), and it is not there",
		cmd, strings.Join(searchPath, ":"))
	if len(notExec) > 0 {
		msg = fmt.Sprintf("%q is not an absolute path, and in systemd's fixed search path it is not executable (%s)",
			cmd, strings.Join(notExec, "; "))
	}
	msg += "; systemd would fail every worker start with status=203/EXEC"
	if path, ok := p.Environment["PATH"]; ok {
		for _, dir := range filepath.SplitList(path) {
			cand := filepath.Join(dir, cmd)
			if filepath.IsAbs(cand) && checkExecutable(cand) == nil {
				return msg + fmt.Sprintf(": found at %s via the pool's environment PATH, which systemd does not use: write %s",
					cand, suggestExec(p, cand))
			}
		}
	}
	return msg + ": write the command's absolute path, as in " + suggestExec(p, "/ABSOLUTE/PATH/"+cmd)
}

// suggestExec is the exec line to write instead, with abs as the command.
func suggestExec(p *config.Pool, abs string) string {
	args := []string{abs}
	if p.App != "" {
		// The app shortcut cannot take a path: spell out what it means.
		args = append(args, p.Exec[1:]...)
	} else if len(p.Exec) > 1 {
		args = append(args, "...")
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = strconv.Quote(a)
		if a == "..." {
			quoted[i] = a
		}
	}
	s := "exec = [" + strings.Join(quoted, ", ") + "]"
	if p.App != "" {
		s += " instead of app"
	}
	return s
}

// checkExecutable is what systemd checks before it executes a command: a
// regular file it may execute. It runs as root, so this is the weaker
// check of any execute bit for a daemon running as root; whether the
// worker's own user may execute it shows only at start.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	case fi.IsDir():
		return errors.New("is a directory")
	case !fi.Mode().IsRegular():
		return errors.New("is not a regular file")
	}
	if err := unix.Access(path, unix.X_OK); err != nil {
		return fmt.Errorf("not executable (mode %04o)", fi.Mode().Perm())
	}
	return nil
}
