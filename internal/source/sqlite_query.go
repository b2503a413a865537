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

// TypeSQLiteQuery runs the operator's own query against any SQLite file.
const TypeSQLiteQuery = "sqlite-query"

// SQLiteQuerySettings are a sqlite-query source's keys.
type SQLiteQuerySettings struct {
	Path  string `toml:"path,omitempty"`
	Query string `toml:"query,omitempty"`
}

// LocalFile implements config.LocalFile.
func (s SQLiteQuerySettings) LocalFile() (key, path string) { return "path", s.Path }

func init() {
	define(config.SourceType{
		Name: TypeSQLiteQuery,
		Doc: "Runs your query against any SQLite file. Writing statements are refused, `NULL` is an error " +
			"(use `count(*)`, or `coalesce(sum(x), 0)`), and text is an error. Do the filtering in the query, " +
			"and leave paused work out of *pending* there too: it is not demand. " + sqliteDoc,
		Keys: []config.KeyDoc{pathKey, {Name: "query", Type: "string", Required: true, Limits: "not blank",
			Doc: "A read-only `SELECT` returning exactly one row of two non-negative whole numbers, in this order: " +
				"pending, running; optionally a third, which must be named `paused`."}},
	}, Watches, decodeSQLiteQuery, func(s SQLiteQuerySettings) (Source, error) {
		switch {
		case s.Path == "":
			return nil, fmt.Errorf("%s source: path is empty", TypeSQLiteQuery)
		case s.Query == "":
			return nil, fmt.Errorf("%s source %s: query is empty", TypeSQLiteQuery, s.Path)
		}
		return &sqliteQuery{path: s.Path, query: s.Query}, nil
	})
}

func decodeSQLiteQuery(d *config.SourceDecoder) SQLiteQuerySettings {
	var s SQLiteQuerySettings
	decodePath(d, &s.Path)
	hasQuery := d.String("query", &s.Query)
	switch {
	case !d.Has("query"):
		d.Errorf("query", "required for %s sources: a SELECT returning pending, running", TypeSQLiteQuery)
	case hasQuery && strings.TrimSpace(s.Query) == "":
		d.Errorf("query", "must not be empty")
	}
	return s
}

// sqliteQuery runs the operator's own read-only query, which must return
// exactly one row of two non-negative integers, pending and running, and
// optionally a third named paused: jobs that would be pending but whose
// queue is paused. The query decides what counts as pending, so it must
// leave the paused jobs out of pending itself.
type sqliteQuery struct {
	path  string
	query string
}

// Watch wakes the pool when anyone writes the database (see watchSQLite).
func (s *sqliteQuery) Watch(ctx context.Context, wake func()) (string, error) {
	return watchSQLite(ctx, TypeSQLiteQuery, s.path, wake)
}

var _ Watcher = (*sqliteQuery)(nil)

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
