// Package flexiqdb knows flexiq's SQLite storage schema: it creates and fills
// databases for tests, the demo and the test worker, and holds the job
// selection (JobFilter) that the daemon's source and the test worker share.
// The daemon itself only ever reads a flexiq database, through package source.
package flexiqdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	// Registers the "sqlite" driver; pure Go, so CGO_ENABLED=0 builds work.
	_ "modernc.org/sqlite"
)

// Job statuses, as flexiq stores them in jobs.status.
const (
	StatusPending   = 0
	StatusRunning   = 1
	StatusComplete  = 2
	StatusFailed    = 3
	StatusDead      = 4
	StatusCancelled = 5
)

// Schema is flexiq's storage schema. All timestamps are Unix milliseconds.
// The (status, queue, scheduled_at) index serves both a worker's claim and
// the autoscaler's pending/running count.
const Schema = `
CREATE TABLE IF NOT EXISTS jobs (
	id           TEXT PRIMARY KEY,
	queue        TEXT NOT NULL DEFAULT 'default',
	namespace    TEXT,
	status       INTEGER NOT NULL DEFAULT 0,
	payload      TEXT,
	priority     INTEGER NOT NULL DEFAULT 0,
	attempts     INTEGER NOT NULL DEFAULT 0,
	worker_id    TEXT,
	error        TEXT,
	created_at   INTEGER NOT NULL,
	scheduled_at INTEGER NOT NULL,
	started_at   INTEGER,
	completed_at INTEGER
);
CREATE INDEX IF NOT EXISTS idx_jobs_status_queue_scheduled
	ON jobs (status, queue, scheduled_at);

CREATE TABLE IF NOT EXISTS workers (
	worker_id      TEXT PRIMARY KEY,
	last_heartbeat INTEGER NOT NULL,
	queues         TEXT NOT NULL DEFAULT '',
	status         TEXT NOT NULL,
	threads        INTEGER NOT NULL DEFAULT 1,
	hostname       TEXT,
	pid            INTEGER,
	started_at     INTEGER
);

CREATE TABLE IF NOT EXISTS queue_state (
	queue_name TEXT NOT NULL,
	namespace  TEXT,
	paused     INTEGER NOT NULL DEFAULT 0,
	UNIQUE (queue_name, namespace)
);
`

// DefaultQueue is the queue a Job with no Queue goes to.
const DefaultQueue = "default"

// Create opens the database at path read-write, creating the file if needed,
// and applies Schema. The database is put in WAL mode, as flexiq runs it, so
// readers (the autoscaler) never block writers (workers) and vice versa.
// Transactions begin IMMEDIATE: a deferred transaction that reads and then
// writes can fail with SQLITE_BUSY_SNAPSHOT without the busy timeout ever
// being consulted, which concurrent workers would hit constantly.
func Create(path string) (*sql.DB, error) {
	dsn := "file:" + escapePath(path) +
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open flexiq database %s: %w", path, err)
	}
	if _, err := db.Exec(Schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("apply flexiq schema to %s: %w", path, err)
	}
	return db, nil
}

// escapePath makes path safe to embed in a "file:" URI. SQLite decodes %HH
// in the path, and the driver splits its own parameters at the first '?', so
// those characters (and '#', the fragment marker) must not appear literally.
func escapePath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// Job is one job to enqueue. Zero values mean: a random ID, DefaultQueue, no
// namespace (NULL), scheduled now, pending, no work.
type Job struct {
	ID          string
	Queue       string
	Namespace   string
	ScheduledAt time.Time
	// Status lets fixtures insert jobs that are already running or finished.
	Status int
	// DurationMs and Fail are the test worker's instructions, kept in payload.
	DurationMs int
	Fail       bool
}

// Payload is the JSON the test worker reads from jobs.payload.
type Payload struct {
	DurationMs int  `json:"duration_ms"`
	Fail       bool `json:"fail,omitempty"`
}

// Enqueue inserts one job.
func Enqueue(db *sql.DB, j Job) error {
	return EnqueueMany(db, []Job{j})
}

// EnqueueMany inserts jobs in one transaction, so a large fixture costs one
// fsync and a reader never sees half of it.
func EnqueueMany(db *sql.DB, jobs []Job) error {
	tx, err := db.Begin()
	if err != nil {
		return fmt.Errorf("enqueue: begin: %w", err)
	}
	defer tx.Rollback() // no-op after Commit
	stmt, err := tx.Prepare(`INSERT INTO jobs
		(id, queue, namespace, status, payload, created_at, scheduled_at, started_at, completed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("enqueue: prepare: %w", err)
	}
	defer stmt.Close()
	now := time.Now().UnixMilli()
	for _, j := range jobs {
		if j.ID == "" {
			j.ID = rand.Text()
		}
		if j.Queue == "" {
			j.Queue = DefaultQueue
		}
		var ns any
		if j.Namespace != "" {
			ns = j.Namespace
		}
		scheduled := now
		if !j.ScheduledAt.IsZero() {
			scheduled = j.ScheduledAt.UnixMilli()
		}
		var started, completed any
		if j.Status != StatusPending {
			started = now
		}
		if j.Status >= StatusComplete {
			completed = now
		}
		payload, err := json.Marshal(Payload{DurationMs: j.DurationMs, Fail: j.Fail})
		if err != nil {
			return fmt.Errorf("enqueue %s: %w", j.ID, err)
		}
		if _, err := stmt.Exec(j.ID, j.Queue, ns, j.Status, string(payload), now, scheduled, started, completed); err != nil {
			return fmt.Errorf("enqueue %s: %w", j.ID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("enqueue: commit: %w", err)
	}
	return nil
}

// Count returns how many jobs have the given status.
func Count(db *sql.DB, status int) (int64, error) {
	var n int64
	if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE status = ?`, status).Scan(&n); err != nil {
		return 0, fmt.Errorf("count jobs with status %d: %w", status, err)
	}
	return n, nil
}

// WaitStats summarises how long completed jobs waited between becoming
// eligible (scheduled_at) and being claimed (started_at): the latency the
// autoscaler exists to bound.
type WaitStats struct {
	Completed int
	P50, P95  time.Duration
	Max       time.Duration
}

// Waits computes WaitStats over all completed jobs. Percentiles are
// nearest-rank; with no completed jobs every field is zero.
func Waits(db *sql.DB) (WaitStats, error) {
	rows, err := db.Query(`SELECT max(started_at - scheduled_at, 0) FROM jobs
		WHERE status = ? AND started_at IS NOT NULL`, StatusComplete)
	if err != nil {
		return WaitStats{}, fmt.Errorf("wait stats: %w", err)
	}
	defer rows.Close()
	var waits []int64
	for rows.Next() {
		var ms int64
		if err := rows.Scan(&ms); err != nil {
			return WaitStats{}, fmt.Errorf("wait stats: %w", err)
		}
		waits = append(waits, ms)
	}
	if err := rows.Err(); err != nil {
		return WaitStats{}, fmt.Errorf("wait stats: %w", err)
	}
	if len(waits) == 0 {
		return WaitStats{}, nil
	}
	slices.Sort(waits)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(waits)))) - 1
		return time.Duration(waits[max(i, 0)]) * time.Millisecond
	}
	return WaitStats{
		Completed: len(waits),
		P50:       rank(0.50),
		P95:       rank(0.95),
		Max:       time.Duration(waits[len(waits)-1]) * time.Millisecond,
	}, nil
}

// PauseLayout is how a database records paused queues. flexiq changed it
// over its history, and an autoscaler must read every version it may meet.
type PauseLayout int

const (
	// NoPauses: the database has no queue_state table, so no queue is
	// paused.
	NoPauses PauseLayout = iota
	// PausesByQueue: queue_state has no namespace column. Before flexiq's
	// migration 0020_queue_state_namespace a pause was keyed by queue_name
	// alone and read unscoped, so it held that queue in every namespace.
	PausesByQueue
	// PausesByNamespace: queue_state has a namespace column, and a pause
	// holds one queue of one namespace. A NULL namespace is the default
	// namespace, one namespace of its own, never "every namespace".
	PausesByNamespace
)

func (l PauseLayout) String() string {
	switch l {
	case NoPauses:
		return "no queue_state table"
	case PausesByQueue:
		return "queue_state without namespace"
	case PausesByNamespace:
		return "queue_state with namespace"
	}
	return fmt.Sprintf("PauseLayout(%d)", int(l))
}

// Querier is what ReadPauseLayout needs: *sql.DB, *sql.Conn and *sql.Tx
// all have it.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ReadPauseLayout says which PauseLayout the database behind q has. Run it in
// the same read transaction as the statement that uses PausedCond, so that a
// flexiq migration cannot land between the two.
func ReadPauseLayout(ctx context.Context, q Querier) (PauseLayout, error) {
	var cols, required, namespace int
	err := q.QueryRowContext(ctx, `SELECT count(*),
	count(*) FILTER (WHERE name COLLATE NOCASE IN ('queue_name', 'paused')),
	count(*) FILTER (WHERE name COLLATE NOCASE = 'namespace')
FROM pragma_table_info('queue_state')`).Scan(&cols, &required, &namespace)
	switch {
	case err != nil:
		return 0, fmt.Errorf("read the queue_state layout: %w", err)
	case cols == 0:
		return NoPauses, nil
	case required != 2:
		return 0, fmt.Errorf("table queue_state has no queue_name or no paused column: not flexiq's")
	case namespace == 0:
		return PausesByQueue, nil
	}
	return PausesByNamespace, nil
}

// PausedCond returns an SQL condition that is true for a row of table jobs
// (referred to by that name) whose queue is paused, as flexiq itself decides
// it. It follows flexiq's Rust core (crates/flexiq-core/src/storage/
// diesel_common/queue_state.rs and migrations/m0020_queue_state_namespace.rs):
// pause_queue sets paused = 1 on the row of (queue_name, namespace), resume
// deletes the row, and the scheduler takes a queue out of dispatch when its
// own namespace's row says paused = 1; its namespace None is matched with
// "namespace IS NULL", which is what IS does here. Before migration 0020
// there was no namespace column and a pause held in every namespace.
//
// The uncorrelated "queue IN (...)" comes first: it lets SQLite seek the
// (status, queue, scheduled_at) index to the paused queues, and spares the
// correlated namespace check for every job whose queue is not paused at all.
func PausedCond(layout PauseLayout) string {
	const byName = `jobs.queue IN (SELECT queue_name FROM queue_state WHERE paused = 1)`
	switch layout {
	case PausesByQueue:
		return "(" + byName + ")"
	case PausesByNamespace:
		return "(" + byName + ` AND EXISTS (SELECT 1 FROM queue_state AS qs
		WHERE qs.paused = 1 AND qs.queue_name = jobs.queue AND qs.namespace IS jobs.namespace))`
	}
	return "(0)"
}

// PauseQueue pauses or resumes a queue of a namespace ("" is the default
// namespace, stored as NULL) the way flexiq's pause_queue and resume_queue
// do: a pause sets paused = 1 on the queue's row, adding the row if there is
// none; a resume deletes the row.
func PauseQueue(db *sql.DB, queue, namespace string, paused bool) error {
	var ns any
	if namespace != "" {
		ns = namespace
	}
	verb := "resume"
	if paused {
		verb = "pause"
	}
	tx, err := db.Begin()
	if err != nil {
		return fmt.Errorf("%s queue %q: begin: %w", verb, queue, err)
	}
	defer tx.Rollback() // no-op after Commit
	if !paused {
		_, err = tx.Exec(`DELETE FROM queue_state WHERE queue_name = ? AND namespace IS ?`, queue, ns)
	} else {
		var res sql.Result
		res, err = tx.Exec(`UPDATE queue_state SET paused = 1 WHERE queue_name = ? AND namespace IS ?`, queue, ns)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err == nil && n == 0 {
			_, err = tx.Exec(`INSERT INTO queue_state (queue_name, namespace, paused) VALUES (?, ?, 1)`, queue, ns)
		}
	}
	if err != nil {
		return fmt.Errorf("%s queue %q: %w", verb, queue, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s queue %q: commit: %w", verb, queue, err)
	}
	return nil
}

// JobFilter renders flexiq's queue and namespace selection of jobs as SQL to
// append to a WHERE clause (" AND queue IN (...) AND namespace = ..."), with
// parameters numbered from ?first, and the values to bind to them. No queues
// means every queue; an empty namespace means any namespace.
func JobFilter(queues []string, namespace string, first int) (string, []any) {
	var sql strings.Builder
	var args []any
	if len(queues) > 0 {
		marks := make([]string, len(queues))
		for i, q := range queues {
			args = append(args, q)
			marks[i] = fmt.Sprintf("?%d", first+len(args)-1)
		}
		fmt.Fprintf(&sql, " AND queue IN (%s)", strings.Join(marks, ", "))
	}
	if namespace != "" {
		args = append(args, namespace)
		fmt.Fprintf(&sql, " AND namespace = ?%d", first+len(args)-1)
	}
	return sql.String(), args
}
