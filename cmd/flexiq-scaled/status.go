package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// statusHelp is status --help: every section and column that printStatus
// prints (TestStatusHelpDescribesOutput holds them to each other).
const statusHelp = `
Show what each pool (or POOL) is doing, one block a pool:

  ● POOL - MODE  the mode: active, paused or pinned (with a --for deadline),
              dry-run, degraded; the bullet is × while the source fails, the
              fleet's store does not answer or the pool is degraded
  Degraded:   since when and why the pool is short of its min_workers
  Workers:    live, draining; the target, min and max
  Groups:     the same for a gang pool (group_size of 2 or more), counted
              in groups, with the ranks of each
  Acting:     starts and stops asked of systemd and not answered yet (only
              while there are any)
  Replicas:   a service pool's live replicas: ready (in discovery) and not
              ready (starting, or failing their readiness probe)
  Queue:      pending, running and paused jobs, the oldest ready job's age;
              "none" for a service without a queue; on a fleet follower,
              read by the fleet's leader
  Source:     its type, ok or failing, when it was last read (not on a
              fleet follower)
  Fleet:      a fleet pool's store ("not answering" when it fails), the
              lease's leader (this host or another) and epoch, this host
  Plan:       the fleet's target, this host's share of it and its phase
              (fresh, joining, hold, fallback, none), the plan's epoch, age
  Fleet error: the store's last failure
  Host:       one line per host of the fleet: its share, its live workers
              and capacity as its last heartbeat said ("?": unknown)
  Last error: the source's last error, and how long ago
  Decision:   the last decision: action, current -> target, how long ago,
              its rationale and the step that held it

Then one line per worker (a gang group's, by its rank 0):
  SLOT, UNIT; STATE, active or draining, or a service replica's readiness:
  ready, starting, not-ready; UPTIME; CPU% over the last tick, in percent
  of one CPU; MEMORY, from its cgroup ("-" where the cgroup does not tell);
  RESTARTS, how often its slot crashed since the daemon started.

Host ids are the first 12 characters of a machine id; an id read from the
store with other characters than letters, digits, '.', '_' and '-' is
printed quoted, and control characters in any text from the store, a source
or a unit are printed escaped.

--json prints the same as JSON, with stable field names, for scripts (also
each replica's ports by name, and a gang pool's group size). --watch
redraws every second until Ctrl-C. --names prints the pools' names, one a
line (for shell completion).

Reading needs root or membership of group flexiq-scaled.`

func cmdStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", "[POOL] [--json] [--watch] [--names]", statusHelp)
	asJSON := fs.Bool("json", false, "print JSON")
	watch := fs.Bool("watch", false, "redraw every second until interrupted")
	names := fs.Bool("names", false, "print only the pools' names")
	sf := addSocketFlags(fs)
	pos, code, done := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 1 {
		return usageError(fs, stderr, "unexpected argument %q", pos[1])
	}
	pool := ""
	if len(pos) == 1 {
		pool = pos[0]
	}
	c := sf.client()
	show := func() int {
		resp, err := c.Status(pool)
		if err != nil {
			return controlFailed(stderr, "status", err)
		}
		writeStatus(stdout, resp, *names, *asJSON)
		return exitOK
	}
	if !*watch {
		return show()
	}
	return watchStatus(stdout, show)
}

// writeStatus prints the daemon's answer: the pools' names, JSON, or the
// text of printStatus.
func writeStatus(stdout io.Writer, resp api.StatusResponse, names, asJSON bool) {
	switch {
	case names:
		for _, v := range resp.Pools {
			fmt.Fprintln(stdout, v.Pool)
		}
	case asJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(resp)
	default:
		printStatus(stdout, resp.Pools, time.Now())
	}
}

// watchStatus redraws the page with show every second until Ctrl-C or
// SIGTERM, or until show fails.
func watchStatus(stdout io.Writer, show func() int) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		// Home and clear, then the page: redrawn in place.
		fmt.Fprint(stdout, "\033[H\033[2J")
		if code := show(); code != exitOK {
			return code
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-t.C:
		}
	}
}
