package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/internal/daemon"
)

// controlFlags are the flags that reload and roll share: how to find the
// daemon, and how long to wait for its verdict.
type controlFlags struct {
	pid        *int
	user       *bool
	runtimeDir *string
	timeout    *time.Duration
}

func addControlFlags(fs *flag.FlagSet) controlFlags {
	return controlFlags{
		pid:        fs.Int("pid", 0, "the daemon's `PID` (default: $MAINPID, as systemd sets it for ExecReload=, else the daemon's PID file)"),
		user:       fs.Bool("user", false, "the daemon runs under the user's service manager (run --user)"),
		runtimeDir: fs.String("runtime-dir", "", "the daemon's runtime `DIR` (default: $RUNTIME_DIRECTORY, else /run/flexiq-scaled, or $XDG_RUNTIME_DIR/flexiq-scaled with --user)"),
		timeout:    fs.Duration("timeout", daemon.DefaultWait, "how long to wait for the daemon's verdict"),
	}
}

// client builds the protocol client for the daemon these flags name.
func (f controlFlags) client() (*daemon.Client, error) {
	dir := *f.runtimeDir
	if dir == "" {
		dir = daemon.RuntimeDir(*f.user)
	}
	pid, err := f.daemonPID(dir)
	if err != nil {
		return nil, err
	}
	return &daemon.Client{
		Dir:  dir,
		Wait: *f.timeout,
		Signal: func(sig syscall.Signal) error {
			if err := syscall.Kill(pid, sig); err != nil {
				return fmt.Errorf("signalling the daemon (PID %d): %w", pid, err)
			}
			return nil
		},
	}, nil
}

func (f controlFlags) daemonPID(dir string) (int, error) {
	if *f.pid > 0 {
		return *f.pid, nil
	}
	if s := os.Getenv("MAINPID"); s != "" {
		if pid, err := strconv.Atoi(s); err == nil && pid > 0 {
			return pid, nil
		}
	}
	path := filepath.Join(dir, daemon.PIDFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%s does not exist: is flexiq-scaled running? (systemctl status flexiq-scaled)", path)
	}
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: not a PID: %q", path, strings.TrimSpace(string(b)))
	}
	// A daemon killed with SIGKILL leaves its PID file behind, and the
	// PID may since have gone to another process: never signal that one.
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != prog {
		return 0, fmt.Errorf("%s names PID %d, which is not a running flexiq-scaled: is flexiq-scaled running?", path, pid)
	}
	return pid, nil
}

// report prints a verdict: what changed on stdout, the problems on stderr.
func report(v daemon.Verdict, stdout, stderr io.Writer) int {
	for _, c := range v.Changes {
		fmt.Fprintln(stdout, c)
	}
	if v.OK {
		return exitOK
	}
	for _, p := range v.Problems {
		fmt.Fprintln(stderr, p)
	}
	return exitFail
}

func cmdReload(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("reload", "[--pid PID] [--user] [--runtime-dir DIR] [--timeout DURATION]", `
Ask the running daemon to re-read its configuration file, and wait for its
verdict. This is the unit's ExecReload=, so that "systemctl reload
flexiq-scaled" fails when the file is rejected.

On acceptance, what changed is printed to stdout, one line per pool (the
keys that differ), or "nothing changed"; the exit status is 0. On
rejection, every problem goes to stderr as "FILE: KEY: MESSAGE", the daemon
keeps running on its old configuration, and the exit status is 1. No
verdict within --timeout is also exit status 1.

The request travels as a file in the daemon's runtime directory, announced
by SIGHUP; a plain SIGHUP still reloads, but answers no one.`)
	cf := addControlFlags(fs)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	c, err := cf.client()
	if err != nil {
		return failf(stderr, "reload", "%v", err)
	}
	v, err := c.Ask(daemon.Request{Op: daemon.OpReload})
	if err != nil {
		return failf(stderr, "reload", "%v", err)
	}
	if !v.OK && len(v.Changes) == 0 {
		fmt.Fprintf(stderr, "%s reload: configuration rejected; the daemon keeps running on the old one:\n", prog)
	}
	return report(v, stdout, stderr)
}

func cmdRoll(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("roll", "[--reason TEXT] [--pid PID] [--user] [--runtime-dir DIR] [--timeout DURATION] POOL...", `
Ask the running daemon for a rollout of each POOL: every worker is replaced,
one at a time, the new one started and active before the old one is drained,
as a changed worker definition is rolled out by a reload. Use it after
deploying new code under an unchanged configuration.

Run as root, it hands the daemon a request file and a signal, and all POOLs
are checked before any is rolled. Anyone else asks over the control socket,
one POOL after the other, which needs membership of group
flexiq-scaled-admin.

The exit status is 0 once the daemon has accepted the rollout (which then
runs on; its progress and end are in the journal), and 1 if a POOL is not
configured (as root nothing is rolled then) or no verdict came within
--timeout.`)
	reason := fs.String("reason", "", "why, for the journal (default \"flexiq-scaled roll\")")
	cf := addControlFlags(fs)
	pools, code, done := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pools) == 0 {
		return usageError(fs, stderr, "no POOL given")
	}
	if os.Geteuid() != 0 {
		// Only root may write the daemon's request file and signal it; the
		// admin group's members roll over the socket, which checks them.
		return rollOverSocket(cf, pools, *reason, stdout, stderr)
	}
	c, err := cf.client()
	if err != nil {
		return failf(stderr, "roll", "%v", err)
	}
	v, err := c.Ask(daemon.Request{Op: daemon.OpRoll, Pools: pools, Reason: *reason})
	if err != nil {
		return failf(stderr, "roll", "%v", err)
	}
	if !v.OK {
		fmt.Fprintf(stderr, "%s roll: refused, nothing rolled:\n", prog)
	}
	return report(v, stdout, stderr)
}

// rollOverSocket asks for each pool's rollout over the control socket in the
// daemon's runtime directory.
func rollOverSocket(cf controlFlags, pools []string, reason string, stdout, stderr io.Writer) int {
	dir := *cf.runtimeDir
	if dir == "" {
		dir = daemon.RuntimeDir(*cf.user)
	}
	c := &control.Client{Socket: filepath.Join(dir, control.SocketName)}
	for _, pool := range pools {
		resp, err := c.Change(pool, "roll", api.ChangeRequest{Reason: reason})
		if err != nil {
			return controlFailed(stderr, "roll", err)
		}
		fmt.Fprintln(stdout, resp.Message)
	}
	return exitOK
}
