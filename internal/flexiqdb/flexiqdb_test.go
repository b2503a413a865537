package flexiqdb

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
