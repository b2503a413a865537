// Command flexiq-testworker is a small flexiq-compatible worker for
// end-to-end tests of flexiq-scaled. It claims jobs from a flexiq SQLite
// database exactly as a flexiq worker does (pending → running → complete,
// leaving the jobs of paused queues alone),
// "works" each for the duration_ms in its payload, and drains on SIGTERM or
// SIGINT: no new claims, jobs in hand finish, exit 0. SIGTSTP quiets it
// (no new claims, no exit), as Sidekiq's does; every signal it gets is
// logged with the time (signals.go). Flags make it
// misbehave on purpose, so tests can see how the daemon copes.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
)

// Exit statuses.
const (
	exitUsage = 2
	exitCrash = 3 // --crash-after fired; tests look for this one
)

func main() {
	os.Exit(runMain())
}

// runMain returns the exit status, so deferred cleanups run before os.Exit.
func runMain() int {
	dbPath := flag.String("db", os.Getenv("FLEXIQ_DB_PATH"), "flexiq SQLite database (default $FLEXIQ_DB_PATH)")
	queues := flag.String("queues", "", "comma-separated queues to work (default all)")
	namespace := flag.String("namespace", "", "namespace to work (default any)")
	threads := flag.Int("threads", 1, "jobs worked concurrently")
	poll := flag.Duration("poll", 100*time.Millisecond, "wait between claims when the queue is empty")
	ignoreTerm := flag.Bool("ignore-sigterm", false, "ignore SIGTERM, so only SIGKILL (or SIGINT) stops the worker")
	crashAfter := flag.Duration("crash-after", 0, fmt.Sprintf("exit %d after this long, mid-job or not", exitCrash))
	busy := flag.Bool("busy", false, "burn CPU while working instead of sleeping")
	flag.Parse()

	// The daemon sets these; putting them on every line lets a test tell
	// from the journal which slot did what.
	logger := log.New(os.Stdout, fmt.Sprintf("worker pool=%s slot=%s ",
		os.Getenv("FLEXIQ_SCALED_POOL"), os.Getenv("FLEXIQ_SCALED_SLOT")), 0)

	switch {
	case *dbPath == "":
		logger.Print("no database: pass --db or set FLEXIQ_DB_PATH")
		return exitUsage
	case *threads < 1:
		logger.Printf("--threads %d: want at least 1", *threads)
		return exitUsage
	case *poll <= 0:
		logger.Printf("--poll %v: want a positive duration", *poll)
		return exitUsage
	}

	drainOn := []os.Signal{syscall.SIGTERM, syscall.SIGINT}
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
		drainOn = []os.Signal{syscall.SIGINT}
	}
	var quiet atomic.Bool
	watchSignals(logger, *ignoreTerm, &quiet)
	ctx, stop := signal.NotifyContext(context.Background(), drainOn...)
	defer stop()

	if *crashAfter > 0 {
		time.AfterFunc(*crashAfter, func() {
			logger.Printf("crashing after %v as asked", *crashAfter)
			os.Exit(exitCrash)
		})
	}

	db, err := flexiqdb.Create(*dbPath)
	if err != nil {
		logger.Print(err)
		return 1
	}
	defer db.Close()

	host, _ := os.Hostname()
	w := &worker{
		db:        db,
		id:        fmt.Sprintf("%s-%d", host, os.Getpid()),
		host:      host,
		namespace: *namespace,
		threads:   *threads,
		poll:      *poll,
		busy:      *busy,
		log:       logger,
		quiet:     &quiet,
	}
	if *queues != "" {
		w.queues = strings.Split(*queues, ",")
	}
	if err := w.run(ctx); err != nil {
		logger.Print(err)
		return 1
	}
	return 0
}
