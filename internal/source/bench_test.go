package source

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
)

// benchDB is a flexiq database in a plausible steady state: a backlog, a few
// running jobs and a long tail of finished ones the index must skip. Queues
// listed in paused are paused.
func benchDB(b *testing.B, paused ...string) string {
	var jobs []flexiqdb.Job
	past := time.Now().Add(-time.Minute)
	for i := range 50_000 {
		j := flexiqdb.Job{Queue: []string{"a", "b", "c"}[i%3], ScheduledAt: past, Status: flexiqdb.StatusComplete}
		switch {
		case i < 1000:
			j.Status = flexiqdb.StatusPending
		case i < 1100:
			j.Status = flexiqdb.StatusRunning
		}
		jobs = append(jobs, j)
	}
	path, db := newDB(b, jobs...)
	for _, q := range paused {
		if err := flexiqdb.PauseQueue(db, q, "", true); err != nil {
			b.Fatal(err)
		}
	}
	return path
}

// BenchmarkObserve measures Observe as shipped (a fresh connection per
// call) against the same query on a long-lived pooled connection, the
// alternative readOnce rejects.
func BenchmarkObserve(b *testing.B) {
	path := benchDB(b)
	ctx := context.Background()
	specs := map[string]config.Source{
		"flexiq-sqlite":           {Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: path}},
		"flexiq-sqlite/queues":    {Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: path, Queues: []string{"a", "b"}}},
		"flexiq-sqlite/namespace": {Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: path, Namespace: "x"}},
		"sqlite-query":            {Type: TypeSQLiteQuery, Settings: SQLiteQuerySettings{Path: path, Query: countsQuery}},
		// A third of the backlog is in a paused queue: the slower path.
		"flexiq-sqlite/paused": {Type: TypeFlexiqSQLite, Settings: FlexiqSQLiteSettings{Path: benchDB(b, "a")}},
	}
	for name, spec := range specs {
		b.Run(name+"/open-per-observe", func(b *testing.B) {
			s := mustNew(b, spec)
			for b.Loop() {
				if _, err := s.Observe(ctx, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}

	b.Run("flexiq-sqlite/pooled", func(b *testing.B) {
		s := newFlexiqSQLite(FlexiqSQLiteSettings{Path: path})
		db, err := sql.Open("sqlite", readOnlyDSN(path))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		for b.Loop() {
			if _, _, err := s.read(ctx, db, time.Now().UnixMilli()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
