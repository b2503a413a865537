package main

// reload and roll, which ask the daemon over its control socket, as the
// other operator's commands do (operator.go), and wait for its verdict.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/internal/daemon"
)

// controlFlags are the flags that reload, roll and pool add/rm share: how
// to find the daemon, and how long to wait for its verdict.
type controlFlags struct {
	socket     *string
	user       *bool
	runtimeDir *string
	pid        *int
	timeout    *time.Duration
}

func addControlFlags(fs *flag.FlagSet) controlFlags {
	return controlFlags{
		socket:     fs.String("socket", "", "the daemon's control `SOCKET` (default: root.sock, which answers root alone, else control.sock, in the runtime directory)"),
		user:       fs.Bool("user", false, "the daemon runs under the user's service manager (run --user)"),
		runtimeDir: fs.String("runtime-dir", "", "the daemon's runtime `DIR`, which holds root.sock and control.sock (default: $RUNTIME_DIRECTORY, else /run/flexiq-scaled, or $XDG_RUNTIME_DIR/flexiq-scaled with --user)"),
		pid: fs.Int("pid", 0, "ignored, kept for older unit files (ExecReload=... --pid $MAINPID); "+
			"used only to send SIGHUP to a daemon that predates reload over the socket, until the package upgrade restarts it"),
		timeout: fs.Duration("timeout", control.ReloadTimeout, "how long to wait for the daemon's verdict"),
	}
}

// client is the control socket's client for the daemon these flags name.
func (f controlFlags) client() *control.Client {
	dir := *f.runtimeDir
	if dir == "" {
		dir = daemon.RuntimeDir(*f.user)
	}
	c := socketClient(*f.socket, dir)
	c.Timeout = *f.timeout
	return c
}

// report prints a verdict: what changed on stdout, the problems on stderr.
func report(v api.ReloadResponse, stdout, stderr io.Writer) int {
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
	fs := newFlagSet("reload", "[--user] [--socket PATH] [--runtime-dir DIR] [--timeout DURATION]", `
Ask the running daemon to re-read its configuration file, and wait for its
verdict. This is the unit's ExecReload=, so that "systemctl reload
flexiq-scaled" fails when the file is rejected.

On acceptance, what changed is printed to stdout, one line per pool (the
keys that differ), or "nothing changed"; the exit status is 0. On
rejection, every problem goes to stderr as "FILE: KEY: MESSAGE", the daemon
keeps running on its old configuration, and the exit status is 1. No
verdict within --timeout is also exit status 1.

The request goes over the control socket, and needs root or membership of
group flexiq-scaled-admin. A plain SIGHUP still reloads, but answers no one.
--pid is accepted for older unit files, and ignored: during a package
upgrade, a daemon that predates reload over the socket gets a plain SIGHUP
from it (or from $MAINPID) until the upgrade restarts it.`)
	cf := addControlFlags(fs)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	v, err := cf.client().Reload()
	if errors.Is(err, control.ErrOlderDaemon) {
		return hupOlderDaemon(cf, stderr, err)
	}
	if err != nil {
		return controlFailed(stderr, "reload", err)
	}
	if !v.OK && len(v.Changes) == 0 {
		fmt.Fprintf(stderr, "%s reload: configuration rejected; the daemon keeps running on the old one:\n", prog)
	}
	return report(v, stdout, stderr)
}

// hupOlderDaemon reloads a daemon from before version 0.18, which takes
// reloads by a request file and SIGHUP only (before the file-and-signal
// protocol was removed): this command, newly unpacked by a package upgrade,
// meets it until the upgrade restarts it. It gets a
// plain SIGHUP, whose verdict goes to the journal only. Without --pid or
// $MAINPID (which systemd sets for ExecReload=) the command fails.
func hupOlderDaemon(cf controlFlags, stderr io.Writer, err error) int {
	pid := *cf.pid
	if pid <= 0 {
		pid, _ = strconv.Atoi(os.Getenv("MAINPID"))
	}
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if pid <= 0 || strings.TrimSpace(string(comm)) != prog {
		return failf(stderr, "reload", "%v: restart it (systemctl restart flexiq-scaled), as the package upgrade does", err)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return failf(stderr, "reload", "signalling the older daemon (PID %d): %v", pid, err)
	}
	fmt.Fprintf(stderr, "%s reload: the running daemon (PID %d) is older than this command: sent it SIGHUP; its verdict is only in the journal (journalctl -u flexiq-scaled)\n", prog, pid)
	return exitOK
}

func cmdRoll(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("roll", "[--reason TEXT] [--user] [--socket PATH] [--runtime-dir DIR] [--timeout DURATION] POOL...", `
Ask the running daemon for a rollout of each POOL: every worker is replaced,
one at a time, the new one started and active before the old one is drained,
as a changed worker definition is rolled out by a reload. Use it after
deploying new code under an unchanged configuration.

The request goes over the control socket, and needs root or membership of
group flexiq-scaled-admin. All POOLs are checked before any is rolled.

The exit status is 0 once the daemon has accepted the rollout (which then
runs on; its progress and end are in the journal), and 1 if a POOL is not
configured (nothing is rolled then) or the daemon did not answer.
--pid is accepted for older unit files, and ignored.`)
	reason := fs.String("reason", "", "why, for the journal (default \"flexiq-scaled roll by\" the caller)")
	cf := addControlFlags(fs)
	pools, code, done := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pools) == 0 {
		return usageError(fs, stderr, "no POOL given")
	}
	c := cf.client()
	st, err := c.Status("")
	if err != nil {
		return controlFailed(stderr, "roll", err)
	}
	var unknown []string
	for _, pool := range pools {
		if !slices.ContainsFunc(st.Pools, func(v api.View) bool { return v.Pool == pool }) {
			unknown = append(unknown, pool)
		}
	}
	if len(unknown) > 0 {
		fmt.Fprintf(stderr, "%s roll: refused, nothing rolled:\nno such pool: %s\n", prog, strings.Join(unknown, ", "))
		return exitFail
	}
	for _, pool := range pools {
		resp, err := c.Change(pool, "roll", api.ChangeRequest{Reason: *reason})
		if err != nil {
			return controlFailed(stderr, "roll", err)
		}
		fmt.Fprintln(stdout, resp.Message)
	}
	return exitOK
}
