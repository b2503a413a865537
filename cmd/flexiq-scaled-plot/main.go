// Command flexiq-scaled-plot draws a pool's history with gonum/plot:
// `flexiq-scaled history POOL --svg FILE` (or --png) runs it with the
// series as CSV on its standard input.
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
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stderr))
}

func run(args []string, stdin io.Reader, stderr io.Writer) int {
	fs := flag.NewFlagSet("flexiq-scaled-plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: flexiq-scaled-plot [--title TITLE] FILE.svg|FILE.png < history.csv")
		fmt.Fprintln(stderr, "Draws the CSV of `flexiq-scaled history --csv` to FILE; flexiq-scaled history --svg and --png run it.")
		fs.PrintDefaults()
	}
	title := fs.String("title", "", "the picture's `TITLE`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	pts, err := history.ReadCSV(stdin)
	if err == nil {
		err = picture.Draw(fs.Arg(0), *title, pts)
	}
	if err != nil {
		fmt.Fprintf(stderr, "flexiq-scaled-plot: %v\n", err)
		return 1
	}
	return 0
}
