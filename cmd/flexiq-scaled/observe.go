package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// observation is what `observe` prints: one read of a pool's source, as the
// daemon would make it at its next tick.
type observation struct {
	Pool         string   `json:"pool"`
	Source       string   `json:"source"`
	Pending      int64    `json:"pending"`
	Running      int64    `json:"running"`
	Paused       int64    `json:"paused"`
	OldestAgeSec *float64 `json:"oldest_age_sec,omitempty"`
}

func cmdObserve(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("observe", "[--config FILE] [--timeout DURATION] POOL", `
Read POOL's queue once, as the daemon does at each tick, and print what it
saw as one line of JSON: {"pending": N, "running": M, "paused": P,
"oldest_age_sec": S}. oldest_age_sec is left out when the source cannot tell.
A source that cannot be read (a server down, wrong credentials, a missing
database) prints its error, naming the source and what failed, and exits 1:
the daemon would hold the pool on that tick. A command source's program runs
as a child of observe, in a process group of its own, as the user who runs
observe; the daemon runs it as a transient unit of its own.`)
	configPath := fs.String("config", config.DefaultPath, "the configuration `file`")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(fs, stderr, "expected one POOL, got %d arguments", fs.NArg())
	}
	name := fs.Arg(0)
	cfg, err := config.Load(*configPath)
	if err != nil {
		return failf(stderr, "observe", "%v", err)
	}
	pc, ok := cfg.Pools[name]
	if !ok {
		return failf(stderr, "observe", "%s has no pool %q", *configPath, name)
	}
	if pc.NoQueue() {
		// Its counts would be zeros that mean nothing, not an empty queue.
		return failf(stderr, "observe", "pool %s reads no queue (source type %s, a service pool without a source): nothing to observe", name, pc.Source.Type)
	}
	src, err := source.New(pc.Source)
	if err != nil {
		return failf(stderr, "observe", "pool %s: %v", name, err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c, err := src.Observe(ctx, time.Now())
	if err != nil {
		return failf(stderr, "observe", "pool %s: %v", name, err)
	}
	o := observation{Pool: name, Source: pc.Source.Type, Pending: c.Pending, Running: c.Running, Paused: c.Paused}
	if c.HasOldest {
		age := c.OldestAge.Seconds()
		o.OldestAgeSec = &age
	}
	b, _ := json.Marshal(o)
	fmt.Fprintln(stdout, string(b))
	return exitOK
}
