package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/simulate"
	"github.com/flexiq/flexiq-scaled/internal/workload"
	"github.com/flexiq/flexiq-scaled/internal/workload/tickcsv"
)

// workloadHelp is simulate's help on its workload mode.
const workloadHelp = `

With --workload, simulate plays a trace of jobs instead: a discrete-event
model of the queue (first in, first out) and of the pool (threads_per_worker
threads a worker, each taking jobs --startup seconds after it starts; victims
idle first; a draining worker finishes its jobs and then stops), ticked every
poll_interval_sec by the daemon's own policy. The trace is CSV, either
arrival,service (seconds) or the Azure LLM trace format
TIMESTAMP,ContextTokens,GeneratedTokens, whose service time --service gives.
table output is a summary: worker-seconds against the floor (the total
service time), wait p50/p95/p99, scale actions (ticks whose target differs
from the current count) and peak workers; jsonl output is one object per tick,
then the summary with "summary": true. See docs/simulate.md.

With --generate poisson|diurnal|onoff, simulate writes a synthetic
arrival,service trace to standard output and reads no configuration.`

// workloadFlags are simulate's flags for its workload mode.
type workloadFlags struct {
	workload, service, svg, generate *string
	startup, step, wake, shift       *float64
	untilMin                         *bool
	gen                              workload.GenSpec
}

func addWorkloadFlags(fs *flag.FlagSet) *workloadFlags {
	w := &workloadFlags{
		workload: fs.String("workload", "", "job trace `FILE` (CSV: arrival,service or TIMESTAMP,ContextTokens,GeneratedTokens); - reads standard input"),
		service:  fs.String("service", workload.DefaultService.String(), "service time of an Azure LLM trace row, in seconds: an `EXPR` such as \"1 + 0.05*GeneratedTokens\""),
		svg:      fs.String("svg", "", "with --workload, also draw the run to `FILE` (SVG)"),
		startup:  fs.Float64("startup", 2, "with --workload, `SECONDS` from a worker's start to its first job"),
		step:     fs.Float64("step", 0, "with --workload, quantise job starts and ends to `SECONDS`, as a time-stepped model does (0: exact)"),
		wake:     fs.Float64("wake", 0, "with --workload, model the daemon's wake-up: every arrival, claim and completion ticks the pool, at most once per `SECONDS` (the daemon's is 0.25 for sources that watch the queue; 0: poll only)"),
		shift:    fs.Float64("shift", 0, "with --workload, delay every arrival by `SECONDS` against the controller's ticks, which stay anchored at the trace's start: the phase of the arrivals against the ticks"),
		untilMin: fs.Bool("until-min", false, "with --workload, run on after the last job until the pool is back at min_workers, and count its cost until then"),
		generate: fs.String("generate", "", "write a synthetic job trace of `KIND` (poisson, diurnal or onoff) to standard output"),
	}
	fs.Float64Var(&w.gen.Duration, "duration", 3600, "with --generate, the trace's length in `SECONDS`")
	fs.Float64Var(&w.gen.Rate, "rate", 2.5, "with --generate, mean arrivals per second (`RATE`)")
	fs.Float64Var(&w.gen.MeanService, "mean-service", 2, "with --generate, mean of the exponential part of a job's service time (`SECONDS`)")
	fs.Float64Var(&w.gen.MinService, "min-service", 0.5, "with --generate, the fixed part of a job's service time (`SECONDS`)")
	fs.Float64Var(&w.gen.PeriodSec, "period", 300, "with --generate onoff, the burst period (`SECONDS`)")
	fs.Float64Var(&w.gen.OnSec, "on", 30, "with --generate onoff, the `SECONDS` of each period that carry all the arrivals")
	fs.Uint64Var(&w.gen.Seed, "seed", 1, "with --generate, the random `SEED`")
	return w
}

// runGenerate writes a synthetic trace.
func (w *workloadFlags) runGenerate(stdout, stderr io.Writer) int {
	w.gen.Kind = *w.generate
	jobs, err := workload.Generate(w.gen)
	if err != nil {
		return failf(stderr, "simulate", "--generate: %v", err)
	}
	if err := workload.WriteTrace(stdout, jobs); err != nil {
		return failf(stderr, "simulate", "write trace: %v", err)
	}
	return exitOK
}

// check validates the workload flags once the mode is known.
func (w *workloadFlags) check() error {
	switch {
	case *w.startup < 0:
		return fmt.Errorf("--startup must be >= 0")
	case *w.step < 0:
		return fmt.Errorf("--step must be >= 0")
	case *w.wake < 0:
		return fmt.Errorf("--wake must be >= 0")
	case !(*w.shift >= 0) || math.IsInf(*w.shift, 0):
		return fmt.Errorf("--shift must be a number of seconds >= 0")
	}
	if _, err := workload.ParseService(*w.service); err != nil {
		return fmt.Errorf("--service: %v", err)
	}
	return nil
}

// run plays the workload trace through pool.
func (w *workloadFlags) run(pool *config.Pool, initial int, format string, stdout, stderr io.Writer) int {
	svc, _ := workload.ParseService(*w.service) // checked
	opt := simulate.WorkloadOptions{
		Service:  svc,
		Startup:  time.Duration(*w.startup * float64(time.Second)),
		Step:     time.Duration(*w.step * float64(time.Second)),
		WakeGap:  time.Duration(*w.wake * float64(time.Second)),
		Shift:    time.Duration(*w.shift * float64(time.Second)),
		Initial:  initial,
		UntilMin: *w.untilMin,
		Format:   format,
	}
	trace := io.Reader(os.Stdin)
	if *w.workload != "-" {
		f, err := os.Open(*w.workload)
		if err != nil {
			return failf(stderr, "simulate", "open workload: %v", err)
		}
		defer f.Close()
		trace = f
	}
	if *w.svg != "" {
		// The helper draws it, as it draws history's pictures: the daemon's
		// binary links no plotting library. Found before the run, so that a
		// missing helper costs no simulation.
		helper, err := findPlotHelper()
		if err != nil {
			return failf(stderr, "simulate", "%v", err)
		}
		title := fmt.Sprintf("flexiq-scaled simulate: pool %s, %s", pool.Name, *w.workload)
		opt.Draw = func(ticks []workload.Tick, r workload.Result) error {
			return drawRun(helper, *w.svg, title, ticks, r)
		}
	}
	_, err := simulate.RunWorkload(pool, trace, opt, stdout)
	if err != nil {
		return failf(stderr, "simulate", "pool %s, workload %s: %v", pool.Name, *w.workload, err)
	}
	return exitOK
}

// drawRun has the helper draw a run's ticks to path as SVG (--svg means SVG,
// whatever the file's name), titled with the run's summary.
func drawRun(helper, path, title string, ticks []workload.Tick, r workload.Result) error {
	rows := make([]tickcsv.Row, len(ticks))
	for i, t := range ticks {
		rows[i] = tickcsv.Row{T: t.T, Pending: t.Pending, Running: t.Running, Live: t.Current, Draining: t.Draining}
	}
	var csv bytes.Buffer
	if err := tickcsv.Write(&csv, rows); err != nil {
		return err
	}
	title += fmt.Sprintf("\nworker-seconds %.0f (floor %.0f), wait p50 %.2f s p95 %.2f s p99 %.2f s, %d actions, peak %d workers",
		r.WorkerSeconds, r.Floor, r.WaitP50, r.WaitP95, r.WaitP99, r.Actions, r.Peak)
	if err := runPlotHelper(helper, &csv, "--run", "--format", "svg", "--title", title, "--", path); err != nil {
		return fmt.Errorf("draw %s: %w", path, err)
	}
	return nil
}
