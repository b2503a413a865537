package source

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ThreadsReporter is implemented by the flexiq sources (flexiq-sqlite,
// flexiq-postgres, flexiq-redis), which can read how many threads flexiq's
// own workers run, for threads_per_worker = "auto". The controller asks it
// once a tick; ok false means no live worker says (none running yet, or none
// serving the pool's queues), and the pool keeps its fallback.
type ThreadsReporter interface {
	Threads(ctx context.Context, now time.Time) (n int, ok bool, err error)
}

// LiveWorkerWindow is how recent a worker's heartbeat must be for its
// threads to count: flexiq's workers heartbeat every few seconds, and one
// silent for longer is dead or stuck.
const LiveWorkerWindow = 30 * time.Second

// liveWorker is one row of flexiq's worker registry, as the Threads methods
// read it.
type liveWorker struct {
	heartbeatMs int64  // last_heartbeat, Unix ms
	queues      string // the queues it serves, comma-separated
	namespace   string // "" for the default namespace
	hasNS       bool   // namespace known to be set (not the default)
	threads     int
}

// pickThreads chooses threads_per_worker from the live workers that serve
// the pool: a heartbeat within LiveWorkerWindow of now, at least one of the
// pool's queues (any, when the pool names none), and the pool's namespace
// (any, when it names none, as the source's own job filter does). Workers
// that disagree are resolved to the fewest threads: the busy signal divides
// running jobs by it, so the lower figure never under-provisions.
func pickThreads(workers []liveWorker, queues []string, namespace string, now time.Time) (int, bool) {
	cutoff := now.Add(-LiveWorkerWindow).UnixMilli()
	best := 0
	for _, w := range workers {
		if w.heartbeatMs < cutoff || w.threads < 1 {
			continue
		}
		if namespace != "" && (!w.hasNS || w.namespace != namespace) {
			continue
		}
		if len(queues) > 0 && !servesAny(w.queues, queues) {
			continue
		}
		if best == 0 || w.threads < best {
			best = w.threads
		}
	}
	return best, best > 0
}

// servesAny says whether a worker's comma-separated queue list holds any of
// queues. flexiq stores a worker's queues joined with commas (and "default"
// when it names none).
func servesAny(list string, queues []string) bool {
	if strings.TrimSpace(list) == "" {
		list = "default"
	}
	for q := range strings.SplitSeq(list, ",") {
		if slices.Contains(queues, strings.TrimSpace(q)) {
			return true
		}
	}
	return false
}

// Threads reads flexiq's workers table (flexiqdb.Schema: threads, queues,
// last_heartbeat; namespace where flexiq's migration added it).
func (s *flexiqSQLite) Threads(ctx context.Context, now time.Time) (int, bool, error) {
	var workers []liveWorker
	err := readOnce(ctx, TypeFlexiqSQLite, s.path, func(ctx context.Context, db *sql.DB) error {
		var err error
		workers, err = sqliteWorkers(ctx, db, now.Add(-LiveWorkerWindow).UnixMilli())
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("%s source %s: reading workers: %w", TypeFlexiqSQLite, s.path, err)
	}
	n, ok := pickThreads(workers, s.queues, s.namespace, now)
	return n, ok, nil
}

// sqliteWorkers reads the live rows of a SQLite workers table. SELECT *
// copes with the namespace column being there or not.
func sqliteWorkers(ctx context.Context, db *sql.DB, cutoffMs int64) ([]liveWorker, error) {
	rows, err := db.QueryContext(ctx, `SELECT * FROM workers WHERE last_heartbeat >= ?1`, cutoffMs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var workers []liveWorker
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		var w liveWorker
		for i, c := range cols {
			switch v := vals[i]; strings.ToLower(c) {
			case "last_heartbeat":
				w.heartbeatMs, _ = v.(int64)
			case "threads":
				n, _ := v.(int64)
				w.threads = int(n)
			case "queues":
				w.queues = asString(v)
			case "namespace":
				if v != nil {
					w.namespace, w.hasNS = asString(v), true
				}
			}
		}
		workers = append(workers, w)
	}
	return workers, rows.Err()
}

func asString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}
