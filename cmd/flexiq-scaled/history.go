package main

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/history"
)

func cmdHistory(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("history", "POOL [--since DURATION|TIME] [--until TIME] [--csv | --svg FILE | --png FILE] [--width N]", `
Show what POOL did: its decision entries in the journal (read with
journalctl -o json, MESSAGE_ID of a decision and FLEXIQ_POOL=POOL) as a text
chart of the live workers and the target over time, the scale events (^ up,
v down) and the pending jobs; or, with --csv, as the series, one row a
decision (time,pending,running,live,target,action), for a spreadsheet;
or, with --svg FILE or --png FILE, as a picture drawn with gonum/plot.

The journal has a decision when the action or the target changes, not every
tick: the series are steps. --since takes a duration back from now (1h,
90m) or any time journalctl takes (systemd.time(7)); --until, the latter.
Reading the system journal takes root or the systemd-journal or adm group.`)
	since := fs.String("since", "1h", "how far back: a `DURATION` (1h) or a journalctl time")
	until := fs.String("until", "", "the end: a journalctl `TIME` (default now)")
	asCSV := fs.Bool("csv", false, "print the series as CSV")
	svg := fs.String("svg", "", "draw the series to `FILE` as SVG (gonum/plot)")
	png := fs.String("png", "", "draw the series to `FILE` as PNG (gonum/plot)")
	width := fs.Int("width", 72, "the chart's width in `COLUMNS`")
	name, code, done := onePoolName(fs, args, stdout, stderr, "POOL")
	if done {
		return code
	}
	sinceSpec := *since
	if d, err := time.ParseDuration(*since); err == nil {
		sinceSpec = fmt.Sprintf("-%ds", int64(d.Seconds()))
	}
	var out, errb bytes.Buffer
	cmd := exec.Command("journalctl", history.JournalArgs(name, sinceSpec, *until)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return failf(stderr, "history", "journalctl: %v: %s", err, bytes.TrimSpace(errb.Bytes()))
	}
	pts, err := history.Parse(&out, name)
	if err != nil {
		return failf(stderr, "history", "%v", err)
	}
	for _, f := range []string{*svg, *png} {
		if f == "" {
			continue
		}
		if err := history.Picture(f, "flexiq-scaled pool "+name, pts); err != nil {
			return failf(stderr, "history", "%v", err)
		}
		fmt.Fprintf(stdout, "wrote %s\n", f)
	}
	if *svg != "" || *png != "" {
		return exitOK
	}
	if *asCSV {
		if err := history.WriteCSV(stdout, pts); err != nil {
			return failf(stderr, "history", "%v", err)
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "pool %s: %d decisions\n", name, len(pts))
	history.Chart(stdout, pts, *width, 8)
	return exitOK
}
