package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

func cmdExplain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("explain", "POOL [--last N] [--json]", `
Show the pool's last N decisions (newest last), each with every input and
step from the queue to the result: the source's counts; the depth, busy,
CPU and latency signals; the bounds; the tolerance; the recommendation of
the tick alone; the scale-up and scale-down windows; an operator's pause or
pin; dry-run. A step marked "<- held" kept the pool from what the steps
before it asked for; "held by" names the one with the last word. The daemon
keeps the last 100 decisions of each pool, in memory.`)
	last := fs.Int("last", 10, "how many decisions")
	asJSON := fs.Bool("json", false, "print JSON")
	sf := addSocketFlags(fs)
	pos, code, done := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, stderr, "want exactly one POOL")
	}
	if *last < 1 {
		return usageError(fs, stderr, "--last must be at least 1")
	}
	resp, err := sf.client().Explain(pos[0], *last)
	if err != nil {
		return controlFailed(stderr, "explain", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(resp)
		return exitOK
	}
	if len(resp.Decisions) == 0 {
		fmt.Fprintf(stdout, "pool %s has decided nothing yet\n", resp.Pool)
	}
	for i, e := range resp.Decisions {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "%s %s: %s %d -> %d (mode %s)\n", e.Time.Local().Format("2006-01-02 15:04:05"), resp.Pool, e.Action, e.Current, e.Desired, e.Mode)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, s := range e.Steps {
			held := ""
			if s.Held {
				held = "<- held"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", api.Printable(s.Name), api.Printable(s.Value), held, api.Printable(s.Note))
		}
		tw.Flush()
		if e.HeldBy != "" {
			fmt.Fprintf(stdout, "  held by: %s\n", api.Printable(e.HeldBy))
		}
	}
	return exitOK
}
