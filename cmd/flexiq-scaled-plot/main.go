// Command flexiq-scaled-plot draws every picture of flexiq-scaled with
// gonum/plot: `flexiq-scaled history POOL --svg FILE` (or --png) runs it
// with the series as CSV on its standard input, and `flexiq-scaled simulate
// --workload ... --svg FILE` runs it with --run and the run's ticks.
//
// It is a binary of its own, installed in /usr/libexec/flexiq-scaled/, so
// that the daemon's binary does not link gonum/plot, whose initialisation
// parses a dozen embedded fonts at every start (docs/performance.md).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/flexiq/flexiq-scaled/internal/history"
	"github.com/flexiq/flexiq-scaled/internal/history/picture"
	"github.com/flexiq/flexiq-scaled/internal/workload/tickcsv"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stderr))
}

func run(args []string, stdin io.Reader, stderr io.Writer) int {
	fs := flag.NewFlagSet("flexiq-scaled-plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: flexiq-scaled-plot [--title TITLE] [--run] [--format svg|png] FILE < series.csv")
		fmt.Fprintln(stderr, "Draws the CSV of `flexiq-scaled history --csv` to FILE; flexiq-scaled history --svg and --png run it.")
		fmt.Fprintln(stderr, "With --run, draws a simulate --workload run's ticks instead; flexiq-scaled simulate --svg runs it so.")
		fs.PrintDefaults()
	}
	title := fs.String("title", "", "the picture's `TITLE`")
	asRun := fs.Bool("run", false, "the CSV is a simulate --workload run's ticks (t,pending,running,live,draining)")
	format := fs.String("format", "", "draw as `FORMAT` (svg or png) whatever FILE's name; for --run only")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	var err error
	if *asRun {
		var ticks []tickcsv.Row
		if ticks, err = tickcsv.Read(stdin); err == nil {
			err = picture.DrawRun(fs.Arg(0), *format, *title, ticks)
		}
	} else if *format != "" {
		err = fmt.Errorf("--format is for --run only: a history picture's format is its file's extension")
	} else {
		var pts []history.Point
		if pts, err = history.ReadCSV(stdin); err == nil {
			err = picture.Draw(fs.Arg(0), *title, pts)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "flexiq-scaled-plot: %v\n", err)
		return 1
	}
	return 0
}
