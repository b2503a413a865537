package source

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// TypeFlexiqSQLite reads flexiq's own jobs table in its SQLite database.
const TypeFlexiqSQLite = "flexiq-sqlite"

// FlexiqSQLiteSettings are a flexiq-sqlite source's keys.
type FlexiqSQLiteSettings struct {
	Path      string   `toml:"path,omitempty"`
	Queues    []string `toml:"queues,omitempty"`    // a filter; nil = all queues
	Namespace string   `toml:"namespace,omitempty"` // a filter; "" = none
}

// LocalFile implements config.LocalFile.
func (s FlexiqSQLiteSettings) LocalFile() (key, path string) { return "path", s.Path }

var (
	queuesKey = config.KeyDoc{Name: "queues", Type: "array of strings", Default: "all queues", Limits: "no empty names",
		Doc: "Count only jobs in these queues. `[]` means all queues."}
	namespaceKey = config.KeyDoc{Name: "namespace", Type: "string", Default: "no filter",
		Doc: "Count only jobs in this namespace. `\"\"` means no filter."}
)

func init() {
	define(config.SourceType{
		Name: TypeFlexiqSQLite,
		Doc: "Reads flexiq's own `jobs` table. *Pending* is the jobs with `status = 0` whose `scheduled_at` " +
			"has come, *running* the jobs with `status = 1`; a job whose queue is paused (`queue_state`) is " +
			"*paused*, not pending. " + sqliteDoc,
		Keys: []config.KeyDoc{pathKey, queuesKey, namespaceKey},
	}, Watches|ReportsThreads|ReadsDemand, decodeFlexiqSQLite, func(s FlexiqSQLiteSettings) (Source, error) {
		if s.Path == "" {
			return nil, fmt.Errorf("%s source: path is empty", TypeFlexiqSQLite)
		}
		return newFlexiqSQLite(s), nil
	})
}

func decodeFlexiqSQLite(d *config.SourceDecoder) FlexiqSQLiteSettings {
	var s FlexiqSQLiteSettings
	decodePath(d, &s.Path)
	d.Queues(&s.Queues)
	d.String("namespace", &s.Namespace)
	return s
}

// flexiqSQLite reads flexiq's own jobs table.
type flexiqSQLite struct {
	path string
	// The statements read runs: counts, or countsNoQueueState on a database
	// without a queue_state table, or pausedCounts of the database's
	// flexiqdb.PauseLayout when a queue is paused.
	counts, countsNoQueueState string
	pausedCounts               [3]string
	// filter holds the queue and namespace values bound after ?1 (now).
	filter []any
	// queues and namespace select the workers Threads reads.
	queues    []string
	namespace string
}

func newFlexiqSQLite(spec FlexiqSQLiteSettings) *flexiqSQLite {
	s := &flexiqSQLite{path: spec.Path, queues: spec.Queues, namespace: spec.Namespace}
	where, filter := flexiqdb.JobFilter(spec.Queues, spec.Namespace, 2)
	s.filter = filter
	s.counts = flexiqCounts(where, `(SELECT EXISTS (SELECT 1 FROM queue_state WHERE paused = 1))`)
	s.countsNoQueueState = flexiqCounts(where, `0`)
	for _, layout := range []flexiqdb.PauseLayout{flexiqdb.PausesByQueue, flexiqdb.PausesByNamespace} {
		s.pausedCounts[layout] = flexiqPausedCounts(where, layout)
	}
	return s
}

// Watch wakes the pool when flexiq writes its database (see watchSQLite).
func (s *flexiqSQLite) Watch(ctx context.Context, wake func()) (string, error) {
	return watchSQLite(ctx, TypeFlexiqSQLite, s.path, wake)
}

var _ Watcher = (*flexiqSQLite)(nil)

// flexiqCounts reads the counts of a database where no queue is paused, in
// one statement and so from one snapshot: pending and running can never
// disagree about a job that moved between them. Its columns: pending,
// running, the oldest pending job's scheduled_at, and anyPaused: whether any
// queue at all is paused, in which case the numbers are void and read runs
// flexiqPausedCounts instead.
//
// Restricting to status IN (0, 1) lets the (status, queue, scheduled_at)
// index skip the finished jobs, which are most of a long-lived table.
func flexiqCounts(where, anyPaused string) string {
	return `SELECT
	count(*) FILTER (WHERE status = 0 AND scheduled_at <= ?1),
	count(*) FILTER (WHERE status = 1),
	min(scheduled_at) FILTER (WHERE status = 0 AND scheduled_at <= ?1),
	` + anyPaused + `
FROM jobs
WHERE status IN (0, 1)` + where
}

// flexiqPausedCounts reads the counts when some queue is paused, in one
// statement. Its columns: pending, running, the oldest pending job's
// scheduled_at, paused. The paused count walks the index over the paused
// queues only; the oldest pending job, only if this pool has paused jobs,
// takes a walk over the due jobs that checks each one. It is a longer
// statement, which SQLite takes several times as long to prepare as
// flexiqCounts: that is why a database with nothing paused never runs it.
func flexiqPausedCounts(where string, layout flexiqdb.PauseLayout) string {
	paused := flexiqdb.PausedCond(layout)
	return `SELECT
	due - paused,
	running,
	CASE WHEN paused = 0 THEN oldest ELSE (
		SELECT min(scheduled_at) FROM jobs
		WHERE status = 0 AND scheduled_at <= ?1` + where + ` AND NOT ` + paused + `
	) END,
	paused
FROM (
	SELECT
		count(*) FILTER (WHERE status = 0 AND scheduled_at <= ?1) AS due,
		count(*) FILTER (WHERE status = 1) AS running,
		min(scheduled_at) FILTER (WHERE status = 0 AND scheduled_at <= ?1) AS oldest,
		(
			SELECT count(*) FROM jobs
			WHERE status = 0 AND scheduled_at <= ?1` + where + ` AND ` + paused + `
		) AS paused
	FROM jobs
	WHERE status IN (0, 1)` + where + `
)`
}

func (s *flexiqSQLite) Observe(ctx context.Context, now time.Time) (Counts, error) {
	var c Counts
	var oldest sql.NullInt64
	err := readOnce(ctx, TypeFlexiqSQLite, s.path, func(ctx context.Context, db *sql.DB) error {
		var err error
		c, oldest, err = s.read(ctx, db, now.UnixMilli())
		return err
	})
	if err != nil {
		return Counts{}, err
	}
	if oldest.Valid {
		c.OldestAge = time.Duration(now.UnixMilli()-oldest.Int64) * time.Millisecond
		c.HasOldest = true
	}
	return c, nil
}

// read reads the counts, and the oldest pending job's scheduled_at.
//
// With nothing paused, which is the common case, that is one statement.
// Otherwise, or on a database without a queue_state table (an older
// flexiq), the statement to run depends on the queue_state table, which a
// flexiq upgrade may add or rebuild at any time: read then looks at the
// table's layout and runs the statement that fits it, both in one read
// transaction, so that they see the same schema and the counts are those of
// one moment.
func (s *flexiqSQLite) read(ctx context.Context, db *sql.DB, nowMs int64) (Counts, sql.NullInt64, error) {
	var c Counts
	var oldest sql.NullInt64
	args := append([]any{nowMs}, s.filter...)
	var anyPaused bool
	err := db.QueryRowContext(ctx, s.counts, args...).Scan(&c.Pending, &c.Running, &oldest, &anyPaused)
	if err == nil && !anyPaused {
		return c, oldest, nil
	}
	// A statement that does not fit the schema fails with SQLite's generic
	// SQLITE_ERROR; any other failure (a lock held past the busy timeout,
	// a damaged file, a done context) would only fail again, and waiting
	// for it twice would cost a second busy timeout.
	var sqliteErr *sqlite.Error
	if err != nil && (!errors.As(err, &sqliteErr) || sqliteErr.Code() != sqlite3.SQLITE_ERROR) {
		return c, oldest, err
	}
	firstErr := err
	c, oldest = Counts{}, sql.NullInt64{}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return c, oldest, err
	}
	defer tx.Rollback() // nothing to commit: this ends the read transaction
	layout, err := flexiqdb.ReadPauseLayout(ctx, tx)
	switch {
	case err != nil:
		return c, oldest, err
	case layout == flexiqdb.NoPauses:
		err = tx.QueryRowContext(ctx, s.countsNoQueueState, args...).Scan(&c.Pending, &c.Running, &oldest, &anyPaused)
	case firstErr != nil:
		// The table is there, so the first statement failed for a reason
		// of its own.
		return c, oldest, firstErr
	default:
		err = tx.QueryRowContext(ctx, s.pausedCounts[layout], args...).Scan(&c.Pending, &c.Running, &oldest, &c.Paused)
	}
	return c, oldest, err
}

// Close has nothing to release: Observe holds nothing between calls.
func (s *flexiqSQLite) Close() error { return nil }
