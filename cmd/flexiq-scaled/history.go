package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/history"
)

func cmdHistory(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("history", "POOL [--since DURATION|TIME] [--until TIME] [--csv | --svg FILE | --png FILE] [--width N]", `
Show what POOL did: its decision entries in the journal (read with
journalctl -o json, MESSAGE_ID of a decision and FLEXIQ_POOL=POOL, written
by flexiq-scaled.service as root: other users' entries are ignored) as a text
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
	// Read as journalctl writes, not gathered first: the output is as
	// long as the journal is, and a line may be very long.
	var errb bytes.Buffer
	cmd := exec.Command("journalctl", history.JournalArgs(name, sinceSpec, *until)...)
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		return failf(stderr, "history", "journalctl: %v", err)
	}
	if err := cmd.Start(); err != nil {
		return failf(stderr, "history", "journalctl: %v", err)
	}
	pts, skipped, perr := history.Parse(out, name)
	if perr != nil {
		cmd.Process.Kill()
	}
	if err := cmd.Wait(); err != nil && perr == nil {
		return failf(stderr, "history", "journalctl: %v: %s", err, bytes.TrimSpace(errb.Bytes()))
	}
	if perr != nil {
		return failf(stderr, "history", "%v", perr)
	}
	if skipped.Foreign > 0 {
		fmt.Fprintf(stderr, "%s history: skipped %d entries for pool %s not written by %s as root\n", prog, skipped.Foreign, name, history.DaemonUnit)
	}
	if skipped.Long > 0 {
		fmt.Fprintf(stderr, "%s history: skipped %d journal lines longer than %d bytes\n", prog, skipped.Long, history.MaxLine)
	}
	for _, f := range []string{*svg, *png} {
		if f == "" {
			continue
		}
		if err := drawPicture(f, "flexiq-scaled pool "+name, pts); err != nil {
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

// plotHelper is the name of the binary that draws pictures with gonum/plot.
// The daemon's binary does not link gonum/plot: its initialisation parses
// a dozen fonts at every start, which cost the daemon 4 MB of memory.
const plotHelper = "flexiq-scaled-plot"

// plotHelperPaths are where the helper may be, from this binary's own path:
// beside it (a build in bin/), then in ../libexec/flexiq-scaled/, where the
// package installs it for /usr/bin/flexiq-scaled.
func plotHelperPaths(self string) []string {
	dir := filepath.Dir(self)
	return []string{
		filepath.Join(dir, plotHelper),
		filepath.Join(filepath.Dir(dir), "libexec", "flexiq-scaled", plotHelper),
	}
}

// drawPicture has the helper draw pts to path (SVG or PNG by its extension),
// the series crossing the pipe as history's CSV.
func drawPicture(path, title string, pts []history.Point) error {
	helper, err := findPlotHelper()
	if err != nil {
		return err
	}
	var csv bytes.Buffer
	if err := history.WriteCSV(&csv, pts); err != nil {
		return err
	}
	return runPlotHelper(helper, &csv, "--title", title, "--", path)
}

// findPlotHelper is the path of the helper, or why it is not there.
func findPlotHelper() (string, error) {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return "", fmt.Errorf("finding %s: %w", plotHelper, err)
	}
	candidates := plotHelperPaths(self)
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("finding %s: %w", plotHelper, err)
		}
	}
	return "", fmt.Errorf("drawing needs %s, which is in neither %s (the package installs it; in a checkout, make build)",
		plotHelper, strings.Join(candidates, " nor "))
}

// runPlotHelper runs helper with args and the series as CSV on its standard
// input; its error message, if it gives one, is the error.
func runPlotHelper(helper string, csv io.Reader, args ...string) error {
	var errb bytes.Buffer
	cmd := exec.Command(helper, args...)
	cmd.Stdin, cmd.Stderr = csv, &errb
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(strings.TrimPrefix(errb.String(), plotHelper+": ")); msg != "" {
			return errors.New(msg)
		}
		return fmt.Errorf("%s: %w", helper, err)
	}
	return nil
}
