package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/workload"
)

// WorkloadOptions are simulate --workload's settings beyond the pool's.
type WorkloadOptions struct {
	Service workload.ServiceModel // for Azure LLM traces
	Startup time.Duration         // from a worker's start to its first job
	Step    time.Duration         // 0: exact; see workload.Config.Step
	WakeGap time.Duration         // 0: poll only; see workload.Config.WakeGap
	Shift   time.Duration         // see workload.Config.Shift
	Initial int                   // workers at the start; negative: min_workers
	// UntilMin: see workload.Config.UntilMin.
	UntilMin bool
	Format   string // FormatTable: a summary; FormatJSONL: one line per tick, then the summary
	// Draw, when not nil, is given the run's ticks and summary to draw a
	// picture of; the CLI has the flexiq-scaled-plot helper draw it.
	Draw func([]workload.Tick, workload.Result) error
}

// WorkloadConfig is the model's configuration for pool: its policy knobs,
// threads and poll interval, as the daemon would use them.
func WorkloadConfig(pool *config.Pool, opt WorkloadOptions) workload.Config {
	return workload.Config{
		Params:   pool.PolicyParams(),
		Poll:     pool.PollInterval,
		Startup:  opt.Startup,
		Initial:  opt.Initial,
		Step:     opt.Step,
		WakeGap:  opt.WakeGap,
		Shift:    opt.Shift,
		UntilMin: opt.UntilMin,
	}
}

// summaryRow is the jsonl summary line; its keys match the table's columns.
type summaryRow struct {
	Summary       bool    `json:"summary"`
	Jobs          int     `json:"jobs"`
	Seconds       float64 `json:"seconds"`
	WorkerSeconds float64 `json:"worker_seconds"`
	Floor         float64 `json:"floor"`
	WaitP50       float64 `json:"wait_p50"`
	WaitP95       float64 `json:"wait_p95"`
	WaitP99       float64 `json:"wait_p99"`
	WaitMax       float64 `json:"wait_max"`
	Actions       int     `json:"actions"`
	Peak          int     `json:"peak"`
}

// RunWorkload plays a job trace through pool's policy in the workload model
// (package workload) and writes the result to out in opt.Format. The whole
// trace is read before anything is written.
func RunWorkload(pool *config.Pool, trace io.Reader, opt WorkloadOptions, out io.Writer) (workload.Result, error) {
	if opt.Format != FormatJSONL && opt.Format != FormatTable {
		return workload.Result{}, fmt.Errorf("unknown output format %q (want %q or %q)", opt.Format, FormatJSONL, FormatTable)
	}
	jobs, err := workload.ReadTrace(trace, opt.Service)
	if err != nil {
		return workload.Result{}, err
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	var ticks []workload.Tick
	var werr error
	res, err := workload.Run(jobs, WorkloadConfig(pool, opt), func(t workload.Tick) {
		if opt.Draw != nil {
			ticks = append(ticks, t)
		}
		if opt.Format == FormatJSONL && werr == nil {
			werr = enc.Encode(t)
		}
	})
	if err != nil {
		return res, err
	}
	if werr != nil {
		return res, fmt.Errorf("write simulation output: %w", werr)
	}
	sum := summaryRow{
		Summary: true, Jobs: res.Jobs, Seconds: res.End, WorkerSeconds: res.WorkerSeconds, Floor: res.Floor,
		WaitP50: res.WaitP50, WaitP95: res.WaitP95, WaitP99: res.WaitP99, WaitMax: res.WaitMax,
		Actions: res.Actions, Peak: res.Peak,
	}
	if opt.Format == FormatJSONL {
		err = enc.Encode(sum)
	} else {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "JOBS\tSECONDS\tWORKER_SECONDS\tFLOOR\tWAIT_P50\tWAIT_P95\tWAIT_P99\tWAIT_MAX\tACTIONS\tPEAK")
		fmt.Fprintf(tw, "%d\t%.1f\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%d\n", sum.Jobs, sum.Seconds, sum.WorkerSeconds, sum.Floor,
			sum.WaitP50, sum.WaitP95, sum.WaitP99, sum.WaitMax, sum.Actions, sum.Peak)
		err = tw.Flush()
	}
	if err != nil {
		return res, fmt.Errorf("write simulation output: %w", err)
	}
	if opt.Draw != nil {
		if err := opt.Draw(ticks, res); err != nil {
			return res, err
		}
	}
	return res, nil
}
