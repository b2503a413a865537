package source

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
)

// countsQuery is a valid sqlite-query equivalent to flexiq-sqlite with no
// filter, used wherever a test runs against both source types.
const countsQuery = `SELECT count(*) FILTER (WHERE status = 0), count(*) FILTER (WHERE status = 1) FROM jobs WHERE status IN (0, 1)`

// newDB creates a flexiq database (WAL mode, as flexiq runs it) holding jobs.
func newDB(t testing.TB, jobs ...flexiqdb.Job) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "flexiq.db")
	db, err := flexiqdb.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if len(jobs) > 0 {
		if err := flexiqdb.EnqueueMany(db, jobs); err != nil {
			t.Fatal(err)
		}
	}
	return path, db
}

// newRollbackDB creates a flexiq database in rollback-journal mode and closes
// it. Outside WAL mode a writer's exclusive lock blocks readers, and a reader
// has no reason to create any file next to the database.
func newRollbackDB(t *testing.T, jobs ...flexiqdb.Job) string {
	t.Helper()
	path, db := newDB(t, jobs...)
	if _, err := db.Exec(`PRAGMA journal_mode = DELETE`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustNew(t testing.TB, spec config.Source) Source {
	t.Helper()
	s, err := New(spec)
	if err != nil {
		t.Fatalf("New(%+v): %v", spec, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// bothSources returns one source of each type reading path.
func bothSources(t *testing.T, path string) map[string]Source {
	return map[string]Source{
		TypeFlexiqSQLite: mustNew(t, config.Source{Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: path}}),
		TypeSQLiteQuery:  mustNew(t, config.Source{Type: TypeSQLiteQuery, Settings: SQLiteQuerySettings{Path: path, Query: countsQuery}}),
	}
}

func wantErrContaining(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", subs)
	}
	for _, sub := range subs {
		if !strings.Contains(err.Error(), sub) {
			t.Errorf("error %q does not contain %q", err, sub)
		}
	}
}

func TestFlexiqSQLiteCounts(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	job := func(queue, ns string, status int, scheduled time.Time) flexiqdb.Job {
		return flexiqdb.Job{Queue: queue, Namespace: ns, Status: status, ScheduledAt: scheduled}
	}
	mixed := []flexiqdb.Job{
		job("a", "", flexiqdb.StatusPending, ago(30*time.Second)),
		job("a", "", flexiqdb.StatusPending, now), // eligible: scheduled_at <= now
		job("a", "", flexiqdb.StatusPending, now.Add(time.Millisecond)),
		job("a", "", flexiqdb.StatusPending, now.Add(time.Hour)),
		job("a", "", flexiqdb.StatusRunning, ago(time.Hour)),
		job("b", "ns1", flexiqdb.StatusPending, ago(10*time.Second)),
		job("b", "ns1", flexiqdb.StatusRunning, now.Add(time.Hour)), // running counts whenever scheduled
		job("c", "ns2", flexiqdb.StatusPending, ago(time.Minute)),
		job("c", "ns2", flexiqdb.StatusPending, ago(2*time.Minute)),
		job("c", "ns2", flexiqdb.StatusRunning, ago(time.Minute)),
		job("c", "ns2", flexiqdb.StatusRunning, ago(time.Minute)),
	}
	for _, status := range []int{flexiqdb.StatusComplete, flexiqdb.StatusFailed, flexiqdb.StatusDead, flexiqdb.StatusCancelled} {
		mixed = append(mixed, job("a", "", status, ago(time.Hour)), job("c", "ns2", status, ago(time.Hour)))
	}

	tests := []struct {
		name      string
		jobs      []flexiqdb.Job
		queues    []string
		namespace string
		want      Counts
	}{
		{name: "empty", want: Counts{}},
		{
			name: "only future jobs",
			jobs: []flexiqdb.Job{job("a", "", flexiqdb.StatusPending, now.Add(time.Second))},
			want: Counts{},
		},
		{
			name: "only running",
			jobs: []flexiqdb.Job{job("a", "", flexiqdb.StatusRunning, ago(time.Second))},
			want: Counts{Running: 1},
		},
		{
			name: "all queues",
			jobs: mixed,
			want: Counts{Pending: 5, Running: 4, OldestAge: 2 * time.Minute, HasOldest: true},
		},
		{
			name:   "one queue",
			jobs:   mixed,
			queues: []string{"a"},
			want:   Counts{Pending: 2, Running: 1, OldestAge: 30 * time.Second, HasOldest: true},
		},
		{
			name:   "two queues",
			jobs:   mixed,
			queues: []string{"a", "b"},
			want:   Counts{Pending: 3, Running: 2, OldestAge: 30 * time.Second, HasOldest: true},
		},
		{
			name:   "unknown queue",
			jobs:   mixed,
			queues: []string{"nope"},
			want:   Counts{},
		},
		{
			name:      "namespace",
			jobs:      mixed,
			namespace: "ns2",
			want:      Counts{Pending: 2, Running: 2, OldestAge: 2 * time.Minute, HasOldest: true},
		},
		{
			name:      "namespace and queue",
			jobs:      mixed,
			queues:    []string{"a", "b"},
			namespace: "ns1",
			want:      Counts{Pending: 1, Running: 1, OldestAge: 10 * time.Second, HasOldest: true},
		},
		{
			name:      "namespace excludes NULL namespace",
			jobs:      mixed,
			queues:    []string{"a"},
			namespace: "ns1",
			want:      Counts{},
		},
		{
			name: "just eligible",
			jobs: []flexiqdb.Job{job("a", "", flexiqdb.StatusPending, now)},
			want: Counts{Pending: 1, HasOldest: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, _ := newDB(t, tt.jobs...)
			s := mustNew(t, config.Source{Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: path, Queues: tt.queues, Namespace: tt.namespace}})
			got, err := s.Observe(context.Background(), now)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// queueState is one row of flexiq's queue_state table.
type queueState struct {
	queue, namespace string // "" namespace: NULL, the default namespace
	paused           int
}

func insertQueueState(t testing.TB, db *sql.DB, rows ...queueState) {
	t.Helper()
	for _, r := range rows {
		var ns any
		if r.namespace != "" {
			ns = r.namespace
		}
		if _, err := db.Exec(`INSERT INTO queue_state (queue_name, namespace, paused) VALUES (?, ?, ?)`, r.queue, ns, r.paused); err != nil {
			t.Fatal(err)
		}
	}
}

// Jobs of a paused queue are not pending but paused; which queue_state rows
// pause which jobs is flexiq's rule (see flexiqdb.PausedCond).
func TestFlexiqSQLitePaused(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	job := func(queue, ns string, status int, scheduled time.Time) flexiqdb.Job {
		return flexiqdb.Job{Queue: queue, Namespace: ns, Status: status, ScheduledAt: scheduled}
	}
	mixed := []flexiqdb.Job{
		job("a", "", flexiqdb.StatusPending, ago(30*time.Second)),
		job("a", "", flexiqdb.StatusPending, now),
		job("a", "", flexiqdb.StatusPending, now.Add(time.Hour)), // future: neither pending nor paused
		job("a", "", flexiqdb.StatusRunning, ago(time.Hour)),
		job("b", "ns1", flexiqdb.StatusPending, ago(10*time.Second)),
		job("b", "ns1", flexiqdb.StatusRunning, ago(time.Second)),
		job("c", "ns2", flexiqdb.StatusPending, ago(time.Minute)),
		job("c", "ns2", flexiqdb.StatusPending, ago(2*time.Minute)),
		job("c", "ns2", flexiqdb.StatusRunning, ago(time.Minute)),
		job("c", "ns2", flexiqdb.StatusComplete, ago(time.Hour)),
		job("c", "", flexiqdb.StatusPending, ago(3*time.Minute)), // c in the default namespace
	}
	tests := []struct {
		name      string
		jobs      []flexiqdb.Job
		state     []queueState
		queues    []string
		namespace string
		want      Counts
	}{
		{
			name: "nothing paused",
			jobs: mixed,
			want: Counts{Pending: 6, Running: 3, OldestAge: 3 * time.Minute, HasOldest: true},
		},
		{
			name:  "one queue paused, the others not",
			jobs:  mixed,
			state: []queueState{{"a", "", 1}},
			want:  Counts{Pending: 4, Paused: 2, Running: 3, OldestAge: 3 * time.Minute, HasOldest: true},
		},
		{
			name:  "the oldest job's queue paused",
			jobs:  mixed,
			state: []queueState{{"c", "", 1}},
			want:  Counts{Pending: 5, Paused: 1, Running: 3, OldestAge: 2 * time.Minute, HasOldest: true},
		},
		{
			// NULL is the default namespace, one of its own: it does not
			// pause c in ns2.
			name:   "NULL namespace pauses the default namespace only",
			jobs:   mixed,
			state:  []queueState{{"c", "", 1}},
			queues: []string{"c"}, namespace: "ns2",
			want: Counts{Pending: 2, Running: 1, OldestAge: 2 * time.Minute, HasOldest: true},
		},
		{
			name:  "a namespace's pause holds there only",
			jobs:  mixed,
			state: []queueState{{"c", "ns2", 1}},
			want:  Counts{Pending: 4, Paused: 2, Running: 3, OldestAge: 3 * time.Minute, HasOldest: true},
		},
		{
			name:  "pause in a namespace without jobs of the queue",
			jobs:  mixed,
			state: []queueState{{"a", "ns1", 1}, {"b", "", 1}, {"b", "ns2", 1}},
			want:  Counts{Pending: 6, Running: 3, OldestAge: 3 * time.Minute, HasOldest: true},
		},
		{
			name:  "paused = 0 is not paused",
			jobs:  mixed,
			state: []queueState{{"a", "", 0}, {"c", "ns2", 0}},
			want:  Counts{Pending: 6, Running: 3, OldestAge: 3 * time.Minute, HasOldest: true},
		},
		{
			name:  "everything paused",
			jobs:  mixed,
			state: []queueState{{"a", "", 1}, {"b", "ns1", 1}, {"c", "ns2", 1}, {"c", "", 1}},
			want:  Counts{Paused: 6, Running: 3},
		},
		{
			name:   "paused queue outside the pool's queues",
			jobs:   mixed,
			state:  []queueState{{"c", "ns2", 1}, {"c", "", 1}},
			queues: []string{"a", "b"},
			want:   Counts{Pending: 3, Running: 2, OldestAge: 30 * time.Second, HasOldest: true},
		},
		{
			name:      "pool's namespace paused",
			jobs:      mixed,
			state:     []queueState{{"c", "ns2", 1}},
			namespace: "ns2",
			want:      Counts{Paused: 2, Running: 1},
		},
		{
			name:  "only future jobs of a paused queue",
			jobs:  []flexiqdb.Job{job("a", "", flexiqdb.StatusPending, now.Add(time.Second))},
			state: []queueState{{"a", "", 1}},
			want:  Counts{},
		},
		{
			name:  "running jobs of a paused queue still run",
			jobs:  []flexiqdb.Job{job("a", "", flexiqdb.StatusRunning, ago(time.Second)), job("a", "", flexiqdb.StatusRunning, now)},
			state: []queueState{{"a", "", 1}},
			want:  Counts{Running: 2},
		},
		{
			name:  "just due in a paused queue",
			jobs:  []flexiqdb.Job{job("a", "", flexiqdb.StatusPending, now), job("b", "", flexiqdb.StatusPending, now)},
			state: []queueState{{"a", "", 1}},
			want:  Counts{Pending: 1, Paused: 1, HasOldest: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, db := newDB(t, tt.jobs...)
			insertQueueState(t, db, tt.state...)
			s := mustNew(t, config.Source{Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: path, Queues: tt.queues, Namespace: tt.namespace}})
			got, err := s.Observe(context.Background(), now)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// flexiq has stored pauses three ways; each database must be read as the
// flexiq that wrote it meant it. The source must follow a database that is
// upgraded under it, since it reads afresh on every Observe.
func TestFlexiqSQLitePauseLayouts(t *testing.T) {
	now := time.Now()
	path, db := newDB(t,
		flexiqdb.Job{Queue: "a", ScheduledAt: now.Add(-time.Minute)},
		flexiqdb.Job{Queue: "a", Namespace: "ns1", ScheduledAt: now.Add(-time.Second)},
		flexiqdb.Job{Queue: "b", ScheduledAt: now.Add(-time.Second)},
		flexiqdb.Job{Queue: "a", Status: flexiqdb.StatusRunning},
	)
	s := mustNew(t, config.Source{Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: path}})
	exec := func(stmt string) {
		t.Helper()
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	observe := func(want Counts) {
		t.Helper()
		got, err := s.Observe(context.Background(), now)
		if err != nil {
			t.Fatal(err)
		}
		got.OldestAge, got.HasOldest = 0, false
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}

	// An older flexiq, with no queue_state table: nothing is paused.
	exec(`DROP TABLE queue_state`)
	observe(Counts{Pending: 3, Running: 1})

	// Before flexiq's migration 0020 queue_state had no namespace, and a
	// pause held its queue in every namespace.
	exec(`CREATE TABLE queue_state (queue_name TEXT PRIMARY KEY, paused INTEGER NOT NULL DEFAULT 0, paused_at INTEGER)`)
	observe(Counts{Pending: 3, Running: 1})
	exec(`INSERT INTO queue_state (queue_name, paused) VALUES ('a', 1)`)
	observe(Counts{Pending: 1, Paused: 2, Running: 1})

	// Migration 0020 carries the rows over as the default namespace's.
	exec(`ALTER TABLE queue_state ADD COLUMN namespace TEXT`)
	observe(Counts{Pending: 2, Paused: 1, Running: 1})
	exec(`DELETE FROM queue_state`)
	observe(Counts{Pending: 3, Running: 1})

	// A queue_state that is not flexiq's is an error, not a guess.
	exec(`DROP TABLE queue_state`)
	exec(`CREATE TABLE queue_state (name TEXT)`)
	_, err := s.Observe(context.Background(), now)
	wantErrContaining(t, err, path, "queue_state")
}

func TestSQLiteQuery(t *testing.T) {
	path, _ := newDB(t,
		flexiqdb.Job{Queue: "a"}, flexiqdb.Job{Queue: "a"}, flexiqdb.Job{Queue: "b"},
		flexiqdb.Job{Queue: "a", Status: flexiqdb.StatusRunning},
	)
	tests := []struct {
		name    string
		query   string
		want    Counts
		wantErr string
	}{
		{name: "counts", query: countsQuery, want: Counts{Pending: 3, Running: 1}},
		{
			name:  "filtered",
			query: `SELECT count(*) FILTER (WHERE status = 0), count(*) FILTER (WHERE status = 1) FROM jobs WHERE queue = 'b'`,
			want:  Counts{Pending: 1},
		},
		{name: "constants", query: `SELECT 7, 0`, want: Counts{Pending: 7}},
		{name: "whole real", query: `SELECT total(priority) + 2, 1.0 FROM jobs`, want: Counts{Pending: 2, Running: 1}},
		{name: "zero rows", query: `SELECT 1, 2 FROM jobs WHERE 0`, wantErr: "no rows"},
		{name: "two rows", query: `SELECT 1, 2 UNION ALL SELECT 3, 4`, wantErr: "more than one row"},
		{name: "paused", query: `SELECT 1, 2, 3 AS paused`, want: Counts{Pending: 1, Running: 2, Paused: 3}},
		{name: "paused in capitals", query: `SELECT 0, 0, count(*) AS PAUSED FROM jobs`, want: Counts{Paused: 4}},
		{name: "one column", query: `SELECT 1`, wantErr: "1 columns, want 2"},
		{name: "unnamed third column", query: `SELECT 1, 2, 3`, wantErr: `third column is named "3", want "paused"`},
		{name: "misnamed third column", query: `SELECT 1, 2, 3 AS waiting`, wantErr: `third column is named "waiting"`},
		{name: "four columns", query: `SELECT 1, 2, 3 AS paused, 4`, wantErr: "4 columns, want 2"},
		{name: "paused NULL", query: `SELECT 1, 2, NULL AS paused`, wantErr: "paused is NULL"},
		{name: "paused negative", query: `SELECT 1, 2, -3 AS paused`, wantErr: "paused is -3"},
		{name: "NULL", query: `SELECT sum(priority), 0 FROM jobs WHERE 0`, wantErr: "pending is NULL"},
		{name: "text", query: `SELECT 1, 'many'`, wantErr: `running is TEXT "many"`},
		{name: "numeric text", query: `SELECT '5', 1`, wantErr: `pending is TEXT "5"`},
		{name: "blob", query: `SELECT x'01', 1`, wantErr: "pending is a BLOB"},
		{name: "negative", query: `SELECT 1, -1`, wantErr: "running is -1"},
		{name: "fraction", query: `SELECT 1.5, 1`, wantErr: "pending is 1.5"},
		{name: "syntax error", query: `SELEC 1, 2`, wantErr: "syntax error"},
		{name: "no such table", query: `SELECT count(*), 0 FROM nope`, wantErr: "no such table"},
		{name: "write", query: `DELETE FROM jobs RETURNING 1, 2`, wantErr: "readonly"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, config.Source{Type: TypeSQLiteQuery, Settings: SQLiteQuerySettings{Path: path, Query: tt.query}})
			got, err := s.Observe(context.Background(), time.Now())
			if tt.wantErr != "" {
				wantErrContaining(t, err, tt.wantErr, path)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	// The write attempt must have changed nothing.
	s := mustNew(t, config.Source{Type: TypeSQLiteQuery, Settings: SQLiteQuerySettings{Path: path, Query: countsQuery}})
	if got, err := s.Observe(context.Background(), time.Now()); err != nil || got != (Counts{Pending: 3, Running: 1}) {
		t.Errorf("after write attempt: got %+v, %v", got, err)
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name    string
		spec    config.Source
		wantErr string
	}{
		{"unknown type", config.Source{Type: "no-such-type"}, `unknown source type "no-such-type"`},
		{"no path", config.Source{Type: TypeFlexiqSQLite}, "path is empty"},
		{"no query", config.Source{Type: TypeSQLiteQuery, Settings: SQLiteQuerySettings{Path: "/x.db"}}, "query is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.spec)
			wantErrContaining(t, err, tt.wantErr)
		})
	}
}

func TestMissingDatabaseAppearsLater(t *testing.T) {
	path := filepath.Join(t.TempDir(), "later.db")
	for typ, s := range bothSources(t, path) {
		t.Run(typ, func(t *testing.T) {
			os.Remove(path)
			_, err := s.Observe(context.Background(), time.Now())
			wantErrContaining(t, err, path, "does not exist")
			if _, statErr := os.Stat(path); !os.IsNotExist(statErr) {
				t.Fatalf("Observe created %s: %v", path, statErr)
			}

			db, err := flexiqdb.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := flexiqdb.Enqueue(db, flexiqdb.Job{ScheduledAt: time.Now().Add(-time.Second)}); err != nil {
				t.Fatal(err)
			}
			got, err := s.Observe(context.Background(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if got.Pending != 1 {
				t.Errorf("pending = %d, want 1", got.Pending)
			}
		})
	}
}

// A database deleted and recreated (say, an operator starting afresh) must be
// read afresh, not through whatever the source had open before.
func TestRecreatedDatabase(t *testing.T) {
	path, db := newDB(t, flexiqdb.Job{}, flexiqdb.Job{})
	s := mustNew(t, config.Source{Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: path}})
	if got, err := s.Observe(context.Background(), time.Now()); err != nil || got.Pending != 2 {
		t.Fatalf("before: got %+v, %v; want 2 pending", got, err)
	}
	db.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	db, err := flexiqdb.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got, err := s.Observe(context.Background(), time.Now()); err != nil || got.Pending != 0 {
		t.Fatalf("after: got %+v, %v; want 0 pending", got, err)
	}
}

func TestPathNeedingEscapes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a?b#c%20d e.db")
	db, err := flexiqdb.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := flexiqdb.Enqueue(db, flexiqdb.Job{ScheduledAt: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("flexiqdb.Create did not create the file by its literal name: %v", err)
	}
	for typ, s := range bothSources(t, path) {
		got, err := s.Observe(context.Background(), time.Now())
		if err != nil || got.Pending != 1 {
			t.Errorf("%s: got %+v, %v; want 1 pending", typ, got, err)
		}
	}
}

func TestLockedDatabase(t *testing.T) {
	path := newRollbackDB(t, flexiqdb.Job{})
	locker, err := sql.Open("sqlite", "file:"+escapePath(path))
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	conn, err := locker.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`)

	const busy = busyTimeoutMs * time.Millisecond
	for typ, s := range bothSources(t, path) {
		t.Run(typ, func(t *testing.T) {
			start := time.Now()
			_, err := s.Observe(context.Background(), time.Now())
			elapsed := time.Since(start)
			wantErrContaining(t, err, path, "locked")
			if elapsed > busy+time.Second {
				t.Errorf("Observe took %v, want about the busy timeout %v", elapsed, busy)
			}

			// A caller's deadline shorter than the busy timeout wins.
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start = time.Now()
			_, err = s.Observe(ctx, time.Now())
			elapsed = time.Since(start)
			if err == nil {
				t.Fatal("Observe on a locked database with a deadline: no error")
			}
			if elapsed > busy/2 {
				t.Errorf("Observe with a 100ms deadline took %v", elapsed)
			}
		})
	}
}

// In WAL mode, as flexiq runs, a worker in the middle of a write transaction
// must not stall the autoscaler, which sees the last committed state.
func TestWALWriterDoesNotBlock(t *testing.T) {
	path, db := newDB(t, flexiqdb.Job{ScheduledAt: time.Now().Add(-time.Second)})
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`)
	if _, err := conn.ExecContext(context.Background(), `UPDATE jobs SET status = 1`); err != nil {
		t.Fatal(err)
	}
	for typ, s := range bothSources(t, path) {
		start := time.Now()
		got, err := s.Observe(context.Background(), time.Now())
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if got.Pending != 1 || got.Running != 0 {
			t.Errorf("%s: got %+v, want the committed 1 pending", typ, got)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: Observe took %v", typ, d)
		}
	}
}

func TestCorruptDatabase(t *testing.T) {
	garbage := bytes.Repeat([]byte("not a database, just garbage\x00\xff"), 512)
	tests := []struct {
		name    string
		damage  func(t *testing.T, path string)
		wantErr string
	}{
		{
			name: "garbage file",
			damage: func(t *testing.T, path string) {
				writeFile(t, path, garbage)
			},
			wantErr: "not a database",
		},
		{
			name: "empty file",
			damage: func(t *testing.T, path string) {
				writeFile(t, path, nil)
			},
			wantErr: "no such table",
		},
		{
			// A valid header over wrecked pages: SQLite opens it and fails
			// only when it reads the schema or the b-trees.
			name: "damaged pages",
			damage: func(t *testing.T, path string) {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				for i := 100; i < len(b); i++ {
					b[i] = garbage[i%len(garbage)]
				}
				writeFile(t, path, b)
			},
			wantErr: "malformed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs := make([]flexiqdb.Job, 500)
			path := newRollbackDB(t, jobs...)
			tt.damage(t, path)
			for typ, s := range bothSources(t, path) {
				_, err := s.Observe(context.Background(), time.Now())
				if err == nil {
					t.Fatalf("%s: no error", typ)
				}
				wantErrContaining(t, err, path, tt.wantErr)
			}
		})
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDoesNotWrite(t *testing.T) {
	t.Run("rollback journal", func(t *testing.T) {
		path := newRollbackDB(t, flexiqdb.Job{}, flexiqdb.Job{Status: flexiqdb.StatusRunning})
		before := snapshot(t, path)
		// A distinctive mtime, so an unchanged one is not a coincidence of
		// timestamp granularity.
		old := time.Now().Add(-time.Hour).Truncate(time.Second)
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
		sources := bothSources(t, path)
		sources["write attempt"] = mustNew(t, config.Source{Type: TypeSQLiteQuery, Settings: SQLiteQuerySettings{Path: path,
			Query: `UPDATE jobs SET status = 2 RETURNING 1, 1`}})
		for range 3 {
			for _, s := range sources {
				s.Observe(context.Background(), time.Now())
			}
		}
		if after := snapshot(t, path); !bytes.Equal(before, after) {
			t.Error("database bytes changed")
		}
		if fi, err := os.Stat(path); err != nil || !fi.ModTime().Equal(old) {
			t.Errorf("mtime changed: %v, %v", fi.ModTime(), err)
		}
		entries, err := os.ReadDir(filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("directory holds %v, want only the database", names)
		}
	})

	// In WAL mode a reader may need to create the -wal and -shm files (as
	// any flexiq client would), but the database and its rows stay as they are.
	t.Run("WAL", func(t *testing.T) {
		path, db := newDB(t, flexiqdb.Job{}, flexiqdb.Job{Status: flexiqdb.StatusRunning})
		db.Close()
		before := snapshot(t, path)
		s := mustNew(t, config.Source{Type: TypeSQLiteQuery, Settings: SQLiteQuerySettings{Path: path, Query: `DELETE FROM jobs RETURNING 1, 1`}})
		if _, err := s.Observe(context.Background(), time.Now()); err == nil {
			t.Error("a DELETE through sqlite-query succeeded")
		}
		for _, s := range bothSources(t, path) {
			if _, err := s.Observe(context.Background(), time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if after := snapshot(t, path); !bytes.Equal(before, after) {
			t.Error("database bytes changed")
		}
		if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() != 0 {
			t.Errorf("reader wrote %d bytes of WAL", fi.Size())
		}
	})
}

func snapshot(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A reader that kept a read transaction open between ticks would pin its
// snapshot and make every checkpoint report busy, so the WAL would grow
// without bound while flexiq runs.
func TestNoReadTransactionLeftOpen(t *testing.T) {
	path, db := newDB(t, flexiqdb.Job{}, flexiqdb.Job{})
	db.SetMaxOpenConns(1) // the checkpoint must run on the connection that wrote
	sources := bothSources(t, path)
	// Fails after reading one row of a table, with its statement still live.
	sources["failing query"] = mustNew(t, config.Source{Type: TypeSQLiteQuery, Settings: SQLiteQuerySettings{Path: path,
		Query: `SELECT status, 0 FROM jobs`}})
	for name, s := range sources {
		if err := flexiqdb.Enqueue(db, flexiqdb.Job{}); err != nil {
			t.Fatal(err)
		}
		s.Observe(context.Background(), time.Now())
		var busy, logFrames, checkpointed int
		if err := db.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &checkpointed); err != nil {
			t.Fatalf("%s: checkpoint: %v", name, err)
		}
		if busy != 0 {
			t.Errorf("%s: checkpoint busy after Observe", name)
		}
		if fi, err := os.Stat(path + "-wal"); err != nil {
			t.Error(err)
		} else if fi.Size() != 0 {
			t.Errorf("%s: WAL not truncated: %d bytes", name, fi.Size())
		}
	}
}

func TestCancelledContext(t *testing.T) {
	path, _ := newDB(t, flexiqdb.Job{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for typ, s := range bothSources(t, path) {
		if _, err := s.Observe(ctx, time.Now()); err == nil {
			t.Errorf("%s: Observe with a cancelled context succeeded", typ)
		}
	}
}
