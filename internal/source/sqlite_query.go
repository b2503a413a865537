package source

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// sqliteQuery runs the operator's own read-only query, which must return
// exactly one row of two non-negative integers, pending and running, and
// optionally a third named paused: jobs that would be pending but whose
// queue is paused. The query decides what counts as pending, so it must
// leave the paused jobs out of pending itself.
type sqliteQuery struct {
	path  string
	query string
}

func newSQLiteQuery(spec config.Source) (*sqliteQuery, error) {
	if spec.Query == "" {
		return nil, fmt.Errorf("%s source %s: query is empty", TypeSQLiteQuery, spec.Path)
	}
	// Silently ignoring a filter would scale on numbers the operator did
	// not ask for; the query has to do its own filtering.
	if len(spec.Queues) > 0 || spec.Namespace != "" {
		return nil, fmt.Errorf("%s source %s: queues and namespace are for type %q only; filter in the query",
			TypeSQLiteQuery, spec.Path, TypeFlexiqSQLite)
	}
	return &sqliteQuery{path: spec.Path, query: spec.Query}, nil
}

func (s *sqliteQuery) Observe(ctx context.Context, _ time.Time) (Counts, error) {
	var c Counts
	err := readOnce(ctx, TypeSQLiteQuery, s.path, func(ctx context.Context, db *sql.DB) error {
		var err error
		c, err = s.run(ctx, db)
		return err
	})
	return c, err
}

// pausedColumn is the name the optional third column must have. Requiring
// the name makes a query written for another purpose, whose third column is
// something else, fail loudly instead of being read as a paused count.
const pausedColumn = "paused"

// run returns the query's one row. Rows are always closed before it returns,
// so the statement's read transaction ends with it.
func (s *sqliteQuery) run(ctx context.Context, db *sql.DB) (Counts, error) {
	rows, err := db.QueryContext(ctx, s.query)
	if err != nil {
		return Counts{}, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return Counts{}, err
	}
	const want = "want 2 (pending, running) or 3 (pending, running, paused)"
	switch {
	case len(cols) < 2 || len(cols) > 3:
		return Counts{}, fmt.Errorf("query returned %d columns, %s", len(cols), want)
	case len(cols) == 3 && !strings.EqualFold(cols[2], pausedColumn):
		return Counts{}, fmt.Errorf("query's third column is named %q, want %q (... AS %s), as in %s",
			cols[2], pausedColumn, pausedColumn, want)
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Counts{}, err
		}
		return Counts{}, errors.New("query returned no rows, want one row (pending, running)")
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return Counts{}, err
	}
	if rows.Next() {
		return Counts{}, errors.New("query returned more than one row, want one row (pending, running)")
	}
	if err := rows.Err(); err != nil {
		return Counts{}, err
	}
	var c Counts
	for i, dst := range []*int64{&c.Pending, &c.Running, &c.Paused}[:len(cols)] {
		if *dst, err = count([]string{"pending", "running", pausedColumn}[i], vals[i]); err != nil {
			return Counts{}, err
		}
	}
	return c, nil
}

// count accepts what the query returned for one column if it is a
// non-negative whole number. Whole REALs are allowed because total() and
// arithmetic on REAL columns produce them; text is not, because a string
// where a number belongs means the query is not the one the operator meant.
func count(name string, v any) (int64, error) {
	var n int64
	switch v := v.(type) {
	case int64:
		n = v
	case float64:
		if v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxInt64 {
			return 0, fmt.Errorf("%s is %v, want a whole number", name, v)
		}
		n = int64(v)
	case nil:
		return 0, fmt.Errorf("%s is NULL, want an integer (sum() of no rows is NULL; use count() or coalesce)", name)
	case string:
		return 0, fmt.Errorf("%s is TEXT %q, want an integer", name, v)
	case []byte:
		return 0, fmt.Errorf("%s is a BLOB, want an integer", name)
	default:
		return 0, fmt.Errorf("%s is %T, want an integer", name, v)
	}
	if n < 0 {
		return 0, fmt.Errorf("%s is %d, want >= 0", name, n)
	}
	return n, nil
}

// Close has nothing to release: Observe holds nothing between calls.
func (s *sqliteQuery) Close() error { return nil }
