// Command flexiqthreads reads a pool's threads_per_worker from flexiq's live
// workers once, as the daemon does for threads_per_worker = "auto", and
// prints {"threads": N, "ok": BOOL}; it exits 1 with the error. The e2e
// tests run it inside the sandbox, next to the servers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

func main() {
	cfgPath := flag.String("config", config.DefaultPath, "the configuration file")
	flag.Parse()
	if err := run(*cfgPath, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "flexiqthreads:", err)
		os.Exit(1)
	}
}

func run(cfgPath, pool string) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	pc, ok := cfg.Pools[pool]
	if !ok {
		return fmt.Errorf("no pool %q", pool)
	}
	src, err := source.New(pc.Source)
	if err != nil {
		return err
	}
	defer src.Close()
	tr, ok := source.As[source.ThreadsReporter](src)
	if !ok {
		return fmt.Errorf("source type %s reports no threads", pc.Source.Type)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	n, ok, err := tr.Threads(ctx, time.Now())
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"threads": n, "ok": ok})
}
