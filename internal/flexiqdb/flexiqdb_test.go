package flexiqdb

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCreateEnqueueCount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "odd ?#% name.db")
	db, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at its literal path: %v", err)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}

	future := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if err := Enqueue(db, Job{ID: "one", Queue: "q", Namespace: "ns", ScheduledAt: future, DurationMs: 250, Fail: true}); err != nil {
		t.Fatal(err)
	}
	if err := EnqueueMany(db, []Job{{}, {Status: StatusRunning}, {Status: StatusComplete}}); err != nil {
		t.Fatal(err)
	}
	// A duplicate ID fails the whole batch, not just its own row.
	if err := EnqueueMany(db, []Job{{ID: "fresh"}, {ID: "one"}}); err == nil {
		t.Error("duplicate ID accepted")
	}

	for status, want := range map[int]int64{StatusPending: 2, StatusRunning: 1, StatusComplete: 1, StatusFailed: 0} {
		if got, err := Count(db, status); err != nil || got != want {
			t.Errorf("Count(%d) = %d, %v; want %d", status, got, err, want)
		}
	}

	var queue, ns, payload string
	var scheduled int64
	if err := db.QueryRow(`SELECT queue, namespace, scheduled_at, payload FROM jobs WHERE id = 'one'`).
		Scan(&queue, &ns, &scheduled, &payload); err != nil {
		t.Fatal(err)
	}
	var p Payload
	if err := json.Unmarshal([]byte(payload), &p); err != nil {
		t.Fatal(err)
	}
	if queue != "q" || ns != "ns" || scheduled != future.UnixMilli() || p != (Payload{DurationMs: 250, Fail: true}) {
		t.Errorf("stored queue=%q namespace=%q scheduled_at=%d payload=%s", queue, ns, scheduled, payload)
	}
	var nulls int
	if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE namespace IS NULL AND queue = ?`, DefaultQueue).Scan(&nulls); err != nil || nulls != 3 {
		t.Errorf("jobs with default queue and NULL namespace: %d, %v; want 3", nulls, err)
	}
}

func TestWaits(t *testing.T) {
	db, err := Create(filepath.Join(t.TempDir(), "flexiq.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got, err := Waits(db); err != nil || got != (WaitStats{}) {
		t.Errorf("no jobs: %+v, %v", got, err)
	}
	jobs := make([]Job, 100)
	for i := range jobs {
		jobs[i] = Job{ID: strconv.Itoa(i + 1), Status: StatusComplete}
	}
	jobs = append(jobs, Job{ID: "pending"}, Job{ID: "running", Status: StatusRunning})
	if err := EnqueueMany(db, jobs); err != nil {
		t.Fatal(err)
	}
	// Waits of 1..100 ms; unfinished jobs do not count.
	if _, err := db.Exec(`UPDATE jobs SET started_at = scheduled_at + CAST(id AS INTEGER) WHERE status = ?`, StatusComplete); err != nil {
		t.Fatal(err)
	}
	want := WaitStats{Completed: 100, P50: 50 * time.Millisecond, P95: 95 * time.Millisecond, Max: 100 * time.Millisecond}
	if got, err := Waits(db); err != nil || got != want {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
}

func TestJobFilter(t *testing.T) {
	tests := []struct {
		name      string
		queues    []string
		namespace string
		first     int
		sql       string
		args      []any
	}{
		{"everything", nil, "", 2, "", nil},
		{"queues", []string{"a", "b"}, "", 2, " AND queue IN (?2, ?3)", []any{"a", "b"}},
		{"namespace", nil, "ns", 3, " AND namespace = ?3", []any{"ns"}},
		{"both", []string{"a"}, "ns", 3, " AND queue IN (?3) AND namespace = ?4", []any{"a", "ns"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sql, args := JobFilter(tc.queues, tc.namespace, tc.first)
			if sql != tc.sql || fmt.Sprint(args) != fmt.Sprint(tc.args) {
				t.Errorf("JobFilter = %q %v, want %q %v", sql, args, tc.sql, tc.args)
			}
		})
	}
}

// PauseQueue keeps one row per (queue, namespace), as flexiq does: a pause
// updates the row or adds it, a resume deletes it, and the default
// namespace (NULL) is a namespace of its own.
func TestPauseQueue(t *testing.T) {
	db, err := Create(filepath.Join(t.TempDir(), "flexiq.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := func() string {
		t.Helper()
		var s string
		if err := db.QueryRow(`SELECT coalesce(group_concat(queue_name || '/' || coalesce(namespace, '-') || '=' || paused, ' '), '')
			FROM (SELECT * FROM queue_state ORDER BY queue_name, namespace)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	steps := []struct {
		queue, namespace string
		paused           bool
		want             string
	}{
		{"a", "", true, "a/-=1"},
		{"a", "", true, "a/-=1"}, // no second NULL-namespace row
		{"a", "ns", true, "a/-=1 a/ns=1"},
		{"b", "ns", true, "a/-=1 a/ns=1 b/ns=1"},
		{"a", "", false, "a/ns=1 b/ns=1"},
		{"a", "", false, "a/ns=1 b/ns=1"},
		{"b", "ns", false, "a/ns=1"},
	}
	for _, st := range steps {
		if err := PauseQueue(db, st.queue, st.namespace, st.paused); err != nil {
			t.Fatal(err)
		}
		if got := rows(); got != st.want {
			t.Errorf("after PauseQueue(%q, %q, %v): %q, want %q", st.queue, st.namespace, st.paused, got, st.want)
		}
	}
	// A row someone left at paused = 0 is paused again in place.
	if _, err := db.Exec(`UPDATE queue_state SET paused = 0`); err != nil {
		t.Fatal(err)
	}
	if err := PauseQueue(db, "a", "ns", true); err != nil {
		t.Fatal(err)
	}
	if got := rows(); got != "a/ns=1" {
		t.Errorf("re-pausing a paused = 0 row: %q", got)
	}
}

func TestReadPauseLayout(t *testing.T) {
	tests := []struct {
		name    string
		ddl     string // run after dropping Schema's queue_state
		want    PauseLayout
		wantErr string
	}{
		{name: "no table", want: NoPauses},
		{name: "before migration 0020", ddl: `CREATE TABLE queue_state (queue_name TEXT PRIMARY KEY, paused BOOLEAN NOT NULL, paused_at BIGINT)`, want: PausesByQueue},
		{name: "with namespace", ddl: Schema, want: PausesByNamespace},
		{name: "column names in capitals", ddl: `CREATE TABLE queue_state (QUEUE_NAME TEXT, Paused INTEGER, NameSpace TEXT)`, want: PausesByNamespace},
		{name: "not flexiq's", ddl: `CREATE TABLE queue_state (queue_name TEXT, state TEXT)`, wantErr: "no queue_name or no paused column"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Create(filepath.Join(t.TempDir(), "flexiq.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`DROP TABLE queue_state`); err != nil {
				t.Fatal(err)
			}
			if tt.ddl != "" {
				if _, err := db.Exec(tt.ddl); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ReadPauseLayout(context.Background(), db)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
			// Whatever the layout, PausedCond fits it.
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE NOT ` + PausedCond(got)).Scan(&n); err != nil {
				t.Errorf("PausedCond(%v) does not fit: %v", got, err)
			}
		})
	}
}
