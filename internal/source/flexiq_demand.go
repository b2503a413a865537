package source

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
)

// Demand is what a queue says about the work arriving at it, over a window:
// for the Little's law signal (demand = "littles-law").
type Demand struct {
	// ArrivalRate is the jobs created per second over the window.
	ArrivalRate float64
	// ServiceTime is the mean of completed_at - started_at over the jobs
	// that finished in the window; meaningful only when Known.
	ServiceTime time.Duration
	// Known is false when no job finished in the window: the service time
	// is then unknown, and the signal sits the tick out.
	Known bool
}

// DemandReader is implemented by sources that can read arrivals and service
// times, which flexiq's own tables keep (created_at, started_at,
// completed_at). The controller asks it once a tick, and only for a pool
// with demand = "littles-law".
type DemandReader interface {
	Demand(ctx context.Context, now time.Time, window time.Duration) (Demand, error)
}

// flexiqSQLiteDemand reads one window: jobs created in (?1, ?2], and the
// mean service time of jobs finished (complete, failed or dead) in it. No
// index covers created_at or completed_at, so each read scans the jobs
// table: it is opt-in, and costs what the table holds.
func flexiqSQLiteDemand(where string) string {
	return fmt.Sprintf(`SELECT
	(SELECT count(*) FROM jobs WHERE created_at > ?1 AND created_at <= ?2%[1]s),
	(SELECT avg(completed_at - started_at) FROM jobs
		WHERE status IN (%[2]d, %[3]d, %[4]d) AND started_at IS NOT NULL
		AND completed_at > ?1 AND completed_at <= ?2%[1]s)`,
		where, flexiqdb.StatusComplete, flexiqdb.StatusFailed, flexiqdb.StatusDead)
}

// Demand reads the window ending at now from flexiq's jobs table.
func (s *flexiqSQLite) Demand(ctx context.Context, now time.Time, window time.Duration) (Demand, error) {
	if window <= 0 {
		return Demand{}, fmt.Errorf("%s source %s: demand window %s must be > 0", TypeFlexiqSQLite, s.path, window)
	}
	where, filter := flexiqdb.JobFilter(s.queues, s.namespace, 3)
	to := now.UnixMilli()
	args := append([]any{to - window.Milliseconds(), to}, filter...)
	var arrivals int64
	var meanMs sql.NullFloat64
	err := readOnce(ctx, TypeFlexiqSQLite, s.path, func(ctx context.Context, db *sql.DB) error {
		return db.QueryRowContext(ctx, flexiqSQLiteDemand(where), args...).Scan(&arrivals, &meanMs)
	})
	if err != nil {
		return Demand{}, fmt.Errorf("reading arrivals and service times: %w", err)
	}
	d := Demand{ArrivalRate: float64(arrivals) / window.Seconds()}
	if meanMs.Valid && meanMs.Float64 >= 0 {
		d.ServiceTime = time.Duration(meanMs.Float64 * float64(time.Millisecond))
		d.Known = true
	}
	return d, nil
}
