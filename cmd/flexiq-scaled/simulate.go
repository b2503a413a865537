package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/simulate"
)

func cmdSimulate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("simulate", "[--config FILE] [--pool NAME] --trace FILE | --workload FILE [--initial N] [--fleet HOSTS [--fleet-fail HOST@SECONDS]] [--format jsonl|table]", simulateHelp+workloadHelp+fleetHelp)
	configPath := fs.String("config", config.DefaultPath, "configuration `FILE`")
	poolName := fs.String("pool", "", "pool to simulate, as in [pools.`NAME`]; may be left out when the config has one pool")
	tracePath := fs.String("trace", "", "trace `FILE` (CSV); - reads standard input")
	var initial optionalCount
	fs.Var(&initial, "initial", "start the trace with `N` workers running (default: the pool's min_workers)")
	format := fs.String("format", simulate.FormatJSONL, "output `FORMAT`: "+simulate.FormatJSONL+" or "+simulate.FormatTable)
	wf := addWorkloadFlags(fs)
	ff := addFleetFlags(fs)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *wf.generate != "" && fs.NArg() == 0 {
		return wf.runGenerate(stdout, stderr)
	}
	fleetOpt, err := ff.options(*tracePath, *wf.workload)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	switch {
	case fs.NArg() > 0:
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	case *tracePath != "" && *wf.workload != "":
		return usageError(fs, stderr, "--trace and --workload exclude each other")
	case *wf.workload != "":
		if err := wf.check(); err != nil {
			return usageError(fs, stderr, "%v", err)
		}
	case *tracePath == "":
		return usageError(fs, stderr, "--trace or --workload is required")
	case *format != simulate.FormatJSONL && *format != simulate.FormatTable:
		return usageError(fs, stderr, "unknown --format %q (want %s or %s)", *format, simulate.FormatJSONL, simulate.FormatTable)
	}

	cfg, pool, code, ok := simulatedPool(fs, *configPath, *poolName, stderr)
	if !ok {
		return code
	}
	if *wf.workload != "" {
		return wf.run(pool, initial.value(), *format, stdout, stderr)
	}
	trace := io.Reader(os.Stdin)
	if *tracePath != "-" {
		f, err := os.Open(*tracePath)
		if err != nil {
			return failf(stderr, "simulate", "open trace: %v", err)
		}
		defer f.Close()
		trace = f
	}
	if ff.set() {
		return runFleet(pool, fleetOpt, trace, *tracePath, *format, stdout, stderr)
	}
	if err := simulate.RunGuarded(pool, cfg.HostGuard, trace, initial.value(), *format, stdout); err != nil {
		return failf(stderr, "simulate", "pool %s, trace %s: %v", pool.Name, *tracePath, err)
	}
	return exitOK
}

// optionalCount is a flag holding a count >= 0 that may be left unset. It
// prints no default in the usage, where -1 (simulate.Run's "unset") would
// only confuse.
type optionalCount struct {
	n   int
	set bool
}

func (c *optionalCount) String() string {
	if c == nil || !c.set {
		return ""
	}
	return strconv.Itoa(c.n)
}

func (c *optionalCount) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return errors.New("want a whole number >= 0")
	}
	c.n, c.set = n, true
	return nil
}

// value is the count, or -1 when unset, as simulate.Run takes it.
func (c *optionalCount) value() int {
	if !c.set {
		return -1
	}
	return c.n
}

const simulateHelp = `
Replay a trace of queue observations through a pool's scaling policy, exactly
as the daemon would decide, and print one decision per trace row. Workers are
assumed to follow every decision at once. Nothing is started and systemd is
not contacted, so the workers' users need not exist here.

The trace is CSV with a header naming its columns in any order: t (seconds,
non-decreasing), pending and running, and optionally cpu (mean worker CPU use
as a fraction of cpu_per_worker) and oldest_age (seconds the oldest ready
job has waited; empty when unknown), which feeds the queue latency signal of
a pool with target_queue_latency_sec. Lines starting with # are comments. A
row with empty pending and running cells is a tick on which the source
failed.

The trigger rules, rate limits and host guard are replayed too, from the
optional columns host_cpu (0..1), psi_cpu and psi_memory (percent),
mem_available (bytes), paused, and one "promql:QUERY" column per promql()
query of the pool's rules, named exactly as the rule writes it (non-zero
fires, 0 does not, empty is a failed query).

jsonl output has one object per row with the keys t, pending, running,
oldest_age, current, desired, latency (what the latency signal asked for,
null when it sat the tick out), action and rationale, and host_cpu,
host_cpu_ema, rule, limit and guard where they have a value.`

// simulatedPool loads the configuration and picks the pool to simulate:
// the one named, or the only one.
func simulatedPool(fs *flag.FlagSet, configPath, poolName string, stderr io.Writer) (*config.Config, *config.Pool, int, bool) {
	// Only the file is checked: simulating is often done on a workstation,
	// where the pool's users need not exist.
	cfg, err := config.Load(configPath)
	if err != nil {
		var cerr *config.Error
		if errors.As(err, &cerr) {
			for _, p := range cerr.Problems {
				fmt.Fprintln(stderr, p.String())
			}
			return nil, nil, exitFail, false
		}
		return nil, nil, failf(stderr, "simulate", "%s: %v", configPath, err), false
	}
	names := slices.Sorted(maps.Keys(cfg.Pools))
	switch {
	case len(names) == 0:
		return nil, nil, failf(stderr, "simulate", "%s has no pools to simulate", cfg.Path), false
	case poolName != "":
		if pool := cfg.Pools[poolName]; pool != nil {
			return cfg, pool, 0, true
		}
		return nil, nil, usageError(fs, stderr, "no pool %q in %s (pools: %s)", poolName, cfg.Path, strings.Join(names, ", ")), false
	case len(names) == 1:
		return cfg, cfg.Pools[names[0]], 0, true
	}
	return nil, nil, usageError(fs, stderr, "%s has %d pools, choose one with --pool (pools: %s)", cfg.Path, len(names), strings.Join(names, ", ")), false
}
