package main

// pause, resume, pin and unpin: an operator's override of a pool's
// scaling, kept by the daemon until it is lifted or its --for runs out.

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

func cmdPause(args []string, stdout, stderr io.Writer) int {
	return overrideCmd("pause", "POOL [--for DURATION]", `
Stop the pool's scaling: it holds its current target whatever the queue
says, and crashed workers are still replaced up to it. --for ends the pause
by itself after DURATION (e.g. 10m, 2h), on the wall clock, across restarts
of the daemon. The pause is kept in /var/lib/flexiq-scaled until "resume".
Needs root or membership of group flexiq-scaled-admin.`, args, stdout, stderr)
}

func cmdResume(args []string, stdout, stderr io.Writer) int {
	return overrideCmd("resume", "POOL", `
End a pause: the pool scales again from its next tick. A pinned pool is
unpinned with "unpin" instead. Needs root or membership of group
flexiq-scaled-admin.`, args, stdout, stderr)
}

func cmdPin(args []string, stdout, stderr io.Writer) int {
	return overrideCmd("pin", "POOL N [--for DURATION]", `
Hold exactly N workers (0 to max_workers), starting or draining workers at
once, whatever the queue says; crashed workers are replaced. --for ends the
pin by itself after DURATION, on the wall clock, across restarts. The pin is
kept in /var/lib/flexiq-scaled until "unpin". Needs root or membership of
group flexiq-scaled-admin.`, args, stdout, stderr)
}

func cmdUnpin(args []string, stdout, stderr io.Writer) int {
	return overrideCmd("unpin", "POOL", `
End a pin: the pool scales again from its next tick. Needs root or
membership of group flexiq-scaled-admin.`, args, stdout, stderr)
}

func overrideCmd(verb, synopsis, description string, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(verb, synopsis, description)
	var forD *time.Duration
	if verb == "pause" || verb == "pin" {
		forD = fs.Duration("for", 0, "end by itself after `DURATION` (default: until "+map[string]string{"pause": "resume", "pin": "unpin"}[verb]+")")
	}
	asJSON := fs.Bool("json", false, "print the daemon's answer as JSON")
	sf := addSocketFlags(fs)
	pos, code, done := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	want := 1
	if verb == "pin" {
		want = 2
	}
	if len(pos) != want {
		return usageError(fs, stderr, "want %s", synopsis)
	}
	var req api.ChangeRequest
	if forD != nil {
		if *forD < 0 {
			return usageError(fs, stderr, "--for must not be negative")
		}
		req.ForSec = forD.Seconds()
	}
	if verb == "pin" {
		n, err := strconv.Atoi(pos[1])
		if err != nil || n < 0 {
			return usageError(fs, stderr, "N: want a number of workers, not %q", pos[1])
		}
		req.Workers = &n
	}
	resp, err := sf.client().Change(pos[0], verb, req)
	if err != nil {
		return controlFailed(stderr, verb, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(resp)
		return exitOK
	}
	fmt.Fprintln(stdout, resp.Message)
	return exitOK
}
