// Command flexiq-demo is `make demo`: the product for real, end to end. It
// boots a throwaway systemd (test/sandbox), installs the flexiq-scaled .deb
// in it, points a pool of test workers at a flexiq SQLite database, replays
// about a minute of a real, bursty job trace into that database, and prints
// one timeline line per second while the daemon scales the pool up and down.
// It ends with a summary (jobs done, p95 wait, worker-seconds, scale events)
// and stops the sandbox, also on Ctrl-C.
//
// It exits 0 only if jobs completed and the daemon both scaled up and down:
// a demo that shows nothing must not look like a success.
//
// Usage (as root; make demo passes the .deb it just built):
//
//	flexiq-demo --deb dist/flexiq-scaled_0.1.0_amd64.deb
//	flexiq-demo            # no .deb: installs bin/flexiq-scaled and the unit by hand
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailed      = 1 // the demo ran but showed no scaling, or lost jobs
	exitUnsupported = 2 // not root, no overlayfs, bad flags: nothing was started
	exitInterrupted = 130
)

func main() {
	os.Exit(run())
}

// settings are the demo's knobs. The defaults were chosen with the trace
// window so that three bursts each drive the pool from 1 to about 8 workers
// and the quiet gaps between them let it fall back.
type settings struct {
	deb    string
	replay replay
	pool   poolSettings
	// tail bounds the wait, after the last arrival, for the queue to drain
	// and the pool to scale back down to min_workers.
	tail time.Duration
}

func run() int {
	start := time.Now()
	s, ok := parseSettings()
	if !ok {
		fmt.Fprintln(os.Stderr, "usage: flexiq-demo [--deb FILE] [flags]; see -h")
		return exitUnsupported
	}
	root, trace, code := prepare(&s)
	if code != exitOK {
		return code
	}

	// The first Ctrl-C cancels ctx: every step returns, and the sandbox is
	// stopped below. Later ones are swallowed so they cannot cut the
	// teardown short; should this process die anyway, the sandbox's keeper
	// sees its owner go and powers the sandbox off by itself.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	d := &demo{s: s, root: root, trace: trace, start: start, out: os.Stdout}
	d.header()
	res, runErr := d.run(ctx)

	if err := d.stopSandbox(); err != nil && runErr == nil {
		runErr = err
	}
	if ctx.Err() != nil {
		fmt.Fprintf(os.Stderr, "flexiq-demo: interrupted after %s; sandbox stopped\n", time.Since(start).Round(time.Second))
		return exitInterrupted
	}
	if res != nil {
		d.summary(res)
	}
	if runErr != nil {
		var f *failure
		if errors.As(runErr, &f) {
			fmt.Fprintf(os.Stderr, "\nFAIL: %v\n", f)
		} else {
			fmt.Fprintf(os.Stderr, "\nFAIL: flexiq-demo: %v\n", runErr)
		}
		return exitFailed
	}
	return exitOK
}

// parseSettings reads the flags; false when they make no demo.
func parseSettings() (settings, bool) {
	var s settings
	flag.StringVar(&s.deb, "deb", "", "the flexiq-scaled .deb to install (default: install bin/flexiq-scaled and systemd/ by hand)")
	flag.Float64Var(&s.replay.Speedup, "speedup", 10, "time compression of the trace: arrival gaps and job service times are divided by it")
	flag.Float64Var(&s.replay.BaseMs, "base-ms", 500, "a job's fixed service time, in trace milliseconds")
	flag.Float64Var(&s.replay.PerTokenMs, "per-token-ms", 10, "a job's service time per generated token, in trace milliseconds")
	flag.IntVar(&s.pool.MaxWorkers, "max-workers", 8, "the pool's max_workers")
	flag.IntVar(&s.pool.Threads, "threads", 2, "threads_per_worker, and the test worker's --threads")
	flag.Float64Var(&s.pool.QueueDepth, "queue-depth", 10, "target_queue_depth_per_worker")
	flag.DurationVar(&s.pool.ScaleDownWindow, "scale-down-window", 12*time.Second, "scale_down_window_sec (the compressed equivalent of two minutes)")
	flag.DurationVar(&s.tail, "tail", 45*time.Second, "after the last arrival, how long to wait at most for the pool to drain and scale down")
	flag.Parse()
	s.pool.MinWorkers = 1
	s.replay.LeadIn = 3 * time.Second
	bad := flag.NArg() > 0 || s.replay.Speedup <= 0 || s.pool.MaxWorkers < 2 || s.pool.Threads < 1 || s.pool.QueueDepth < 1
	return s, !bad
}

// prepare checks, before anything is started, that the demo can run here,
// makes s.deb absolute and loads the trace's window. A code other than
// exitOK ends the demo, the reason said on stderr.
func prepare(s *settings) (root string, trace []arrival, code int) {
	// Say plainly why the demo cannot run here before doing anything else.
	if why := sandbox.Unsupported(); why != "" {
		fmt.Fprintf(os.Stderr, "flexiq-demo: cannot run on this machine: %s.\n", why)
		fmt.Fprintln(os.Stderr, "flexiq-demo: run `make demo` as root on Linux with overlayfs (Debian 12 or similar).")
		return "", nil, exitUnsupported
	}
	root, err := sandbox.ModuleRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "flexiq-demo: run it from the flexiq-scaled checkout: %v\n", err)
		return "", nil, exitUnsupported
	}
	if s.deb != "" {
		if s.deb, err = filepath.Abs(s.deb); err == nil {
			_, err = os.Stat(s.deb)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "flexiq-demo: --deb: %v\n", err)
			return "", nil, exitUnsupported
		}
	}
	trace, err = loadWindow()
	if err != nil {
		fmt.Fprintf(os.Stderr, "flexiq-demo: %v\n", err)
		return "", nil, exitFailed
	}
	return root, trace, exitOK
}

// stopSandbox stops the sandbox, if one was booted, and says so; its error
// is the stop's.
func (d *demo) stopSandbox() error {
	if d.sb == nil {
		return nil
	}
	d.logf("stopping the sandbox")
	sctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	err := d.sb.Stop(sctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "flexiq-demo: stopping the sandbox: %v\n", err)
		return err
	}
	d.logf("sandbox stopped: nothing of it is left on this machine")
	return nil
}

// failure is a demo that ran to the end but did not show what it exists to
// show; run reports it after the summary.
type failure struct{ why string }

func (f *failure) Error() string { return f.why }
