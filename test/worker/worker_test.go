package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
)

func newDB(t *testing.T, jobs ...flexiqdb.Job) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "flexiq.db")
	db, err := flexiqdb.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := flexiqdb.EnqueueMany(db, jobs); err != nil {
		t.Fatal(err)
	}
	return path, db
}

// start runs w in the background; the returned function cancels it (the
// SIGTERM equivalent) and returns run's error once it has finished.
func start(t *testing.T, w *worker) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.run(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("worker did not stop within 10s of cancel")
			return nil
		}
	}
}

func newWorker(db *sql.DB, id string, out *bytes.Buffer) *worker {
	return &worker{db: db, id: id, host: "test", threads: 1, poll: 10 * time.Millisecond,
		log: log.New(out, "worker pool=p slot=1 ", 0)}
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func count(t *testing.T, db *sql.DB, status int) int64 {
	t.Helper()
	n, err := flexiqdb.Count(db, status)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestWorksJobs(t *testing.T) {
	_, db := newDB(t,
		flexiqdb.Job{ID: "a1", Queue: "a", DurationMs: 20},
		flexiqdb.Job{ID: "a2", Queue: "a", DurationMs: 20},
		flexiqdb.Job{ID: "a3", Queue: "a"},
		flexiqdb.Job{ID: "a4", Queue: "a", Fail: true},
		flexiqdb.Job{ID: "b1", Queue: "b"},
		flexiqdb.Job{ID: "later", Queue: "a", ScheduledAt: time.Now().Add(time.Hour)},
	)
	var out bytes.Buffer
	w := newWorker(db, "w1", &out)
	w.queues = []string{"a"}
	w.threads = 3
	stop := start(t, w)
	waitFor(t, "queue a to be worked", func() bool {
		return count(t, db, flexiqdb.StatusComplete) == 3 && count(t, db, flexiqdb.StatusFailed) == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	want := map[string]int{"a1": 2, "a2": 2, "a3": 2, "a4": 3, "b1": 0, "later": 0}
	rows, err := db.Query(`SELECT id, status, coalesce(worker_id, ''), started_at IS NOT NULL, completed_at IS NOT NULL, attempts FROM jobs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, workerID string
		var status, attempts int
		var started, completed bool
		if err := rows.Scan(&id, &status, &workerID, &started, &completed, &attempts); err != nil {
			t.Fatal(err)
		}
		if status != want[id] {
			t.Errorf("job %s: status %d, want %d", id, status, want[id])
		}
		worked := want[id] != flexiqdb.StatusPending
		if worked != (workerID == "w1") || worked != started || worked != completed || worked != (attempts == 1) {
			t.Errorf("job %s: worker_id=%q started=%v completed=%v attempts=%d", id, workerID, started, completed, attempts)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	for _, line := range []string{"worker pool=p slot=1 claimed job a1\n", "worker pool=p slot=1 failed job a4\n"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, out.String())
		}
	}
	var status string
	if err := db.QueryRow(`SELECT status FROM workers WHERE worker_id = 'w1'`).Scan(&status); err != nil || status != "stopped" {
		t.Errorf("workers row: status %q, %v; want stopped", status, err)
	}
}

// A worker claims no job of a paused queue, as flexiq's dequeue does not:
// the pause holds its queue in its own namespace, NULL being the default
// one. A resumed queue is worked again.
func TestHonoursPausedQueues(t *testing.T) {
	_, db := newDB(t,
		flexiqdb.Job{ID: "a-default", Queue: "a"},
		flexiqdb.Job{ID: "a-ns1", Queue: "a", Namespace: "ns1"},
		flexiqdb.Job{ID: "b-ns1", Queue: "b", Namespace: "ns1"},
		flexiqdb.Job{ID: "b-default", Queue: "b"},
	)
	for _, p := range []struct{ queue, namespace string }{{"a", ""}, {"b", "ns1"}} {
		if err := flexiqdb.PauseQueue(db, p.queue, p.namespace, true); err != nil {
			t.Fatal(err)
		}
	}
	status := func(id string) int {
		t.Helper()
		var s int
		if err := db.QueryRow(`SELECT status FROM jobs WHERE id = ?`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	w := newWorker(db, "w1", new(bytes.Buffer))
	stop := start(t, w)
	defer stop()
	waitFor(t, "the unpaused jobs to be worked", func() bool {
		return status("a-ns1") == flexiqdb.StatusComplete && status("b-default") == flexiqdb.StatusComplete
	})
	// Many more polls than it took to work the others.
	time.Sleep(20 * w.poll)
	for _, id := range []string{"a-default", "b-ns1"} {
		if s := status(id); s != flexiqdb.StatusPending {
			t.Errorf("job %s of a paused queue: status %d, want pending", id, s)
		}
	}

	if err := flexiqdb.PauseQueue(db, "a", "", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resumed queue's job to be worked", func() bool { return status("a-default") == flexiqdb.StatusComplete })
	if s := status("b-ns1"); s != flexiqdb.StatusPending {
		t.Errorf("job b-ns1, still paused: status %d, want pending", s)
	}
}

// A database of a flexiq older than pauses has no queue_state table; the
// worker works it all the same.
func TestWorksWithoutQueueState(t *testing.T) {
	_, db := newDB(t, flexiqdb.Job{ID: "j"})
	if _, err := db.Exec(`DROP TABLE queue_state`); err != nil {
		t.Fatal(err)
	}
	w := newWorker(db, "w1", new(bytes.Buffer))
	stop := start(t, w)
	waitFor(t, "the job to be worked", func() bool { return count(t, db, flexiqdb.StatusComplete) == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// Cancelling run is what SIGTERM does: the job in hand finishes and is
// recorded, and nothing more is claimed.
func TestDrainFinishesJobInHand(t *testing.T) {
	const jobMs = 300
	_, db := newDB(t, flexiqdb.Job{ID: "long", DurationMs: jobMs})
	var out bytes.Buffer
	w := newWorker(db, "w1", &out)
	stop := start(t, w)
	waitFor(t, "the job to be claimed", func() bool { return count(t, db, flexiqdb.StatusRunning) == 1 })
	if err := flexiqdb.Enqueue(db, flexiqdb.Job{ID: "next"}); err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d < jobMs/2*time.Millisecond {
		t.Errorf("run returned %v after cancel; the job in hand takes about %dms", d, jobMs)
	}
	var status int
	if err := db.QueryRow(`SELECT status FROM jobs WHERE id = 'long'`).Scan(&status); err != nil || status != flexiqdb.StatusComplete {
		t.Errorf("job in hand: status %d, %v; want complete", status, err)
	}
	if err := db.QueryRow(`SELECT status FROM jobs WHERE id = 'next'`).Scan(&status); err != nil || status != flexiqdb.StatusPending {
		t.Errorf("job enqueued during the drain: status %d, %v; want still pending", status, err)
	}
}

// Workers in separate processes share only the database; each has its own
// connections. Every job must be claimed exactly once.
func TestConcurrentWorkersClaimEachJobOnce(t *testing.T) {
	const jobs = 200
	fixture := make([]flexiqdb.Job, jobs)
	path, db := newDB(t, fixture...)
	var stops []func() error
	for i := range 4 {
		own, err := flexiqdb.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { own.Close() })
		w := newWorker(own, fmt.Sprintf("w%d", i), new(bytes.Buffer))
		w.threads = 2
		w.poll = time.Millisecond
		stops = append(stops, start(t, w))
	}
	waitFor(t, "all jobs to complete", func() bool { return count(t, db, flexiqdb.StatusComplete) == jobs })
	for _, stop := range stops {
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	var maxAttempts, workers int
	if err := db.QueryRow(`SELECT max(attempts), count(DISTINCT worker_id) FROM jobs`).Scan(&maxAttempts, &workers); err != nil {
		t.Fatal(err)
	}
	if maxAttempts != 1 {
		t.Errorf("a job was claimed %d times", maxAttempts)
	}
	t.Logf("%d jobs spread over %d workers", jobs, workers)
}

func TestBusyBurnsCPU(t *testing.T) {
	const jobMs = 300
	_, db := newDB(t, flexiqdb.Job{DurationMs: jobMs})
	w := newWorker(db, "w1", new(bytes.Buffer))
	w.busy = true
	before := cpuTime(t)
	stop := start(t, w)
	waitFor(t, "the job to complete", func() bool { return count(t, db, flexiqdb.StatusComplete) == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// A sleeping job uses about a millisecond; a busy one its whole time
	// when it has a core to itself. A fifth of it still tells the two apart
	// on a machine whose cores are busy with other tests (at half, this
	// failed while another suite ran beside it: 135 ms of 300).
	if used := cpuTime(t) - before; used < jobMs/5*time.Millisecond {
		t.Errorf("a %dms busy job used %v of CPU", jobMs, used)
	}
}

func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
