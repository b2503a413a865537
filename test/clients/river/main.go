// Command river drives River (github.com/riverqueue/river) for
// flexiq-scaled's end-to-end tests, through River's own Go client, so that
// its schema comes from its own migrations (rivermigrate) and the jobs and
// pauses are exactly what River writes. It runs every operation given, in
// order:
//
//	river URL SCHEMA [OP...]
//
// where OP is
//
//	insert,QUEUE,N[,RUN_IN_SECONDS]  N jobs of kind "work": available, or scheduled then (negative: in the past)
//	take,QUEUE,N                     N due jobs, then marked running as River's fetch (JobGetAvailable) does
//	pause,QUEUE                      Client.QueuePause, after registering the queue as a producer does
//
// With no OP it only migrates. With FLEXIQ_MARK set, it prints
// flexiq-mark-usec=CLOCK_MONOTONIC in µs just before the first operation
// (the benchmark's start: the client's start and migration are not the
// queue's latency), and flexiq-done-usec after the last. It is a test client: the daemon does not use
// River's code.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"golang.org/x/sys/unix"
)

type workArgs struct {
	I int `json:"i"`
}

func (workArgs) Kind() string { return "work" }

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "river:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: river URL SCHEMA [OP...]")
	}
	url, schema, ops := args[0], args[1], args[2:]
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema})
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	client, err := river.NewClient(driver, &river.Config{Schema: schema}) // insert-only: no queues, no workers
	if err != nil {
		return err
	}
	mark("mark")
	for _, op := range ops {
		f := strings.Split(op, ",")
		if err := apply(ctx, pool, driver, client, schema, f); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	mark("done")
	return nil
}

// mark prints flexiq-WHAT-usec=CLOCK_MONOTONIC in µs when FLEXIQ_MARK is set.
func mark(what string) {
	if os.Getenv("FLEXIQ_MARK") != "" {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		fmt.Printf("flexiq-%s-usec=%d\n", what, ts.Nano()/1000)
	}
}

func apply(ctx context.Context, pool *pgxpool.Pool, driver *riverpgxv5.Driver, client *river.Client[pgx.Tx], schema string, f []string) error {
	switch {
	case (f[0] == "insert" || f[0] == "take") && len(f) >= 3:
		n, err := strconv.Atoi(f[2])
		if err != nil {
			return err
		}
		// River inserts a job with a ScheduledAt, even a past one, as
		// 'scheduled' (its scheduler makes it 'available' when due), and one
		// without as 'available', notifying the insert.
		var at time.Time
		if len(f) == 4 {
			secs, err := strconv.Atoi(f[3])
			if err != nil {
				return err
			}
			at = time.Now().Add(time.Duration(secs) * time.Second)
		}
		params := make([]river.InsertManyParams, n)
		for i := range params {
			params[i] = river.InsertManyParams{Args: workArgs{I: i}, InsertOpts: &river.InsertOpts{Queue: f[1], ScheduledAt: at}}
		}
		res, err := client.InsertMany(ctx, params)
		if err != nil {
			return err
		}
		if f[0] == "insert" {
			return nil
		}
		ids := make([]int64, len(res))
		for i, r := range res {
			ids[i] = r.Job.ID
		}
		// What JobGetAvailable does to the jobs a producer fetches.
		_, err = pool.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "river_job"}.Sanitize()+`
SET state = 'running', attempt = attempt + 1, attempted_at = now(), attempted_by = array_append(attempted_by, 'test-client')
WHERE id = ANY($1)`, ids)
		return err
	case f[0] == "pause" && len(f) == 2:
		if _, err := driver.GetExecutor().QueueCreateOrSetUpdatedAt(ctx, &riverdriver.QueueCreateOrSetUpdatedAtParams{
			Metadata: []byte("{}"), Name: f[1], Schema: schema,
		}); err != nil {
			return fmt.Errorf("registering the queue: %w", err)
		}
		return client.QueuePause(ctx, f[1], nil)
	}
	return fmt.Errorf("unknown operation")
}
