package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
)

// heartbeatEvery is how often the worker refreshes workers.last_heartbeat.
const heartbeatEvery = 2 * time.Second

// worker claims and runs jobs the way a flexiq worker does.
type worker struct {
	db        *sql.DB // from flexiqdb.Create: transactions BEGIN IMMEDIATE
	id        string
	host      string
	queues    []string // empty = all
	namespace string   // empty = any
	threads   int
	poll      time.Duration
	busy      bool // burn CPU while working instead of sleeping
	log       *log.Logger
	quiet     *atomic.Bool // set by the quiet signal: claim nothing more; nil = never
}

// job is a claimed job.
type job struct {
	id      string
	payload string
}

// run works jobs on w.threads loops until ctx is done, then lets every job
// already claimed finish before returning: ctx is the drain signal, not a
// kill.
func (w *worker) run(ctx context.Context) error {
	if err := w.setStatus("active"); err != nil {
		return fmt.Errorf("register worker %s: %w", w.id, err)
	}
	w.log.Printf("started id=%s threads=%d queues=%q namespace=%q", w.id, w.threads, strings.Join(w.queues, ","), w.namespace)

	// Not ctx: that is the drain signal, and a worker asked to drain
	// before it got this far still stops cleanly.
	layout, err := flexiqdb.ReadPauseLayout(context.Background(), w.db)
	if err != nil {
		return fmt.Errorf("worker %s: %w", w.id, err)
	}
	claim := w.claimQuery(layout)
	var loops sync.WaitGroup
	for range w.threads {
		loops.Go(func() { w.loop(ctx, claim) })
	}
	stopped := make(chan struct{})
	var beat sync.WaitGroup
	beat.Go(func() { w.heartbeat(ctx, stopped) })
	loops.Wait()
	close(stopped)
	beat.Wait()

	if err := w.setStatus("stopped"); err != nil {
		w.log.Printf("deregister: %v", err)
	}
	w.log.Printf("stopped")
	return nil
}

func (w *worker) loop(ctx context.Context, claim claimQuery) {
	for ctx.Err() == nil {
		if w.quiet != nil && w.quiet.Load() {
			select {
			case <-ctx.Done():
			case <-time.After(w.poll):
			}
			continue
		}
		j, err := w.claim(ctx, claim)
		if err != nil && ctx.Err() == nil {
			// Usually a lock held past the busy timeout: worth a retry, as a
			// real worker would, not worth dying for.
			w.log.Printf("claim: %v", err)
		}
		if j == nil {
			select {
			case <-ctx.Done():
			case <-time.After(w.poll):
			}
			continue
		}
		w.work(j)
	}
}

// claimQuery is the claim statement and its filter arguments, built once.
type claimQuery struct {
	sql    string
	filter []any // bound after ?1 (now) and ?2 (worker id)
}

// claimQuery builds the claim statement for a database whose queue_state
// table has the given layout. Like flexiq's dequeue, it never claims a job
// of a paused queue; flexiq's scheduler reads the pauses at most once a
// second, this worker at every claim.
func (w *worker) claimQuery(layout flexiqdb.PauseLayout) claimQuery {
	var c claimQuery
	var where string
	where, c.filter = flexiqdb.JobFilter(w.queues, w.namespace, 3)
	c.sql = `UPDATE jobs SET status = 1, started_at = ?1, worker_id = ?2, attempts = attempts + 1
WHERE id = (
	SELECT id FROM jobs WHERE status = 0 AND scheduled_at <= ?1` + where + `
		AND NOT ` + flexiqdb.PausedCond(layout) + `
	ORDER BY priority DESC, scheduled_at, id LIMIT 1
) AND status = 0
RETURNING id, coalesce(payload, '')`
	return c
}

// claim moves the next eligible job from pending to running, or returns nil
// when there is none. The transaction is BEGIN IMMEDIATE, so two workers
// cannot both pick the same job; and if ctx ends before the commit the
// transaction rolls back, so a job is either claimed and worked or untouched.
func (w *worker) claim(ctx context.Context, c claimQuery) (*job, error) {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() // no-op after Commit
	args := append([]any{time.Now().UnixMilli(), w.id}, c.filter...)
	var j job
	if err := tx.QueryRowContext(ctx, c.sql, args...).Scan(&j.id, &j.payload); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit claim of %s: %w", j.id, err)
	}
	return &j, nil
}

// work runs a claimed job to completion. It deliberately ignores the drain
// signal: finishing the job in hand is what draining means.
func (w *worker) work(j *job) {
	w.log.Printf("claimed job %s", j.id)
	var p flexiqdb.Payload
	var failure string
	if err := json.Unmarshal([]byte(j.payload), &p); err != nil {
		failure = fmt.Sprintf("bad payload %q: %v", j.payload, err)
	} else {
		w.spend(time.Duration(p.DurationMs) * time.Millisecond)
		if p.Fail {
			failure = "failed as the payload asked"
		}
	}

	status, verb := flexiqdb.StatusComplete, "completed"
	var errText any
	if failure != "" {
		status, verb, errText = flexiqdb.StatusFailed, "failed", failure
	}
	_, err := w.db.Exec(`UPDATE jobs SET status = ?, completed_at = ?, error = ? WHERE id = ? AND worker_id = ?`,
		status, time.Now().UnixMilli(), errText, j.id, w.id)
	if err != nil {
		w.log.Printf("record job %s as %s: %v", j.id, verb, err)
		return
	}
	w.log.Printf("%s job %s", verb, j.id)
}

// spend takes d of wall time, either asleep or, with --busy, on a CPU so
// the daemon's CPU signal has something to see.
func (w *worker) spend(d time.Duration) {
	if !w.busy {
		time.Sleep(d)
		return
	}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
	}
}

// heartbeat keeps workers.last_heartbeat fresh until stopped is closed, and
// marks the worker draining once ctx ends.
func (w *worker) heartbeat(ctx context.Context, stopped <-chan struct{}) {
	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	status, done := "active", ctx.Done()
	for {
		select {
		case <-stopped:
			return
		case <-done:
			// A nil channel never fires again: announce the drain once.
			status, done = "draining", nil
			w.log.Printf("draining: no new claims, finishing jobs in hand")
		case <-tick.C:
		}
		if err := w.setStatus(status); err != nil {
			w.log.Printf("heartbeat: %v", err)
		}
	}
}

func (w *worker) setStatus(status string) error {
	_, err := w.db.Exec(`INSERT INTO workers
		(worker_id, last_heartbeat, queues, status, threads, hostname, pid, started_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?2)
		ON CONFLICT (worker_id) DO UPDATE SET last_heartbeat = ?2, status = ?4`,
		w.id, time.Now().UnixMilli(), strings.Join(w.queues, ","), status, w.threads, w.host, os.Getpid())
	return err
}
