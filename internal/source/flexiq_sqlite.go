package source

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
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
	var q strings.Builder
	q.WriteString(`SELECT
	count(*) FILTER (WHERE status = 0 AND scheduled_at <= ?1),
	count(*) FILTER (WHERE status = 1),
	min(scheduled_at) FILTER (WHERE status = 0 AND scheduled_at <= ?1)
FROM jobs
WHERE status IN (0, 1)`)
	if len(spec.Queues) > 0 {
		marks := make([]string, len(spec.Queues))
		for i, queue := range spec.Queues {
			s.filter = append(s.filter, queue)
			marks[i] = fmt.Sprintf("?%d", len(s.filter)+1)
		}
		fmt.Fprintf(&q, " AND queue IN (%s)", strings.Join(marks, ", "))
	}
	if spec.Namespace != "" {
		s.filter = append(s.filter, spec.Namespace)
		fmt.Fprintf(&q, " AND namespace = ?%d", len(s.filter)+1)
	}
	s.query = q.String()
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
