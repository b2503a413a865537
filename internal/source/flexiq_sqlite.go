package source

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
)

// flexiqSQLite reads flexiq's own jobs table.
type flexiqSQLite struct {
	path  string
	query string
	// filter holds the queue and namespace values bound after ?1 (now).
	filter []any
}

func newFlexiqSQLite(spec config.Source) (*flexiqSQLite, error) {
	if spec.Query != "" {
		return nil, fmt.Errorf("%s source %s: query is for type %q only", TypeFlexiqSQLite, spec.Path, TypeSQLiteQuery)
	}
	s := &flexiqSQLite{path: spec.Path}
	// One statement reads all three numbers from one snapshot, so pending
	// and running can never disagree about a job that moved between them.
	// Restricting to status IN (0, 1) lets the (status, queue, scheduled_at)
	// index skip the finished jobs, which are most of a long-lived table.
	where, filter := flexiqdb.JobFilter(spec.Queues, spec.Namespace, 2)
	s.filter = filter
	s.query = `SELECT
	count(*) FILTER (WHERE status = 0 AND scheduled_at <= ?1),
	count(*) FILTER (WHERE status = 1),
	min(scheduled_at) FILTER (WHERE status = 0 AND scheduled_at <= ?1)
FROM jobs
WHERE status IN (0, 1)` + where
	return s, nil
}

func (s *flexiqSQLite) Observe(ctx context.Context, now time.Time) (Counts, error) {
	nowMs := now.UnixMilli()
	args := append([]any{nowMs}, s.filter...)
	var c Counts
	var oldest sql.NullInt64
	err := readOnce(ctx, TypeFlexiqSQLite, s.path, func(ctx context.Context, db *sql.DB) error {
		return db.QueryRowContext(ctx, s.query, args...).Scan(&c.Pending, &c.Running, &oldest)
	})
	if err != nil {
		return Counts{}, err
	}
	if oldest.Valid {
		c.OldestAge = time.Duration(nowMs-oldest.Int64) * time.Millisecond
		c.HasOldest = true
	}
	return c, nil
}

// Close has nothing to release: Observe holds nothing between calls.
func (s *flexiqSQLite) Close() error { return nil }
