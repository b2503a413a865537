// Package source reads a pool's queue depth. Each source type lives in its
// own file behind the small Source interface, so the controller never knows
// where its numbers come from.
package source

import (
	"context"
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// Source types, as written in [pools.NAME.source] type.
const (
	TypeFlexiqSQLite = "flexiq-sqlite"
	TypeSQLiteQuery  = "sqlite-query"
)

// Counts is one observation of a queue.
type Counts struct {
	// Pending counts jobs eligible to run now; Running, jobs claimed by a worker.
	Pending, Running int64
	// Paused counts the jobs that would be pending but whose queue is
	// paused: no worker may claim them, so they are not demand, and Pending
	// leaves them out. A paused queue's running jobs are still in Running:
	// a pause stops dispatch, not work in hand.
	Paused int64
	// OldestAge is how long the oldest pending job (paused ones excluded)
	// has been eligible. It is meaningful only when HasOldest is true, which it is
	// not when nothing is pending or the source cannot tell.
	OldestAge time.Duration
	HasOldest bool
}

// Source reads one queue's counts.
type Source interface {
	// Observe reads the queue's counts as of now. Any error means "no data": the controller holds.
	Observe(ctx context.Context, now time.Time) (Counts, error)
	Close() error
}

// New returns the source spec describes. It does not touch the database:
// a database that does not exist yet is an Observe error, not a New error,
// so the daemon can start before flexiq has created it.
func New(spec config.Source) (Source, error) {
	switch spec.Type {
	case TypeFlexiqSQLite, TypeSQLiteQuery:
	default:
		return nil, fmt.Errorf("unknown source type %q (want %q or %q)", spec.Type, TypeFlexiqSQLite, TypeSQLiteQuery)
	}
	if spec.Path == "" {
		return nil, fmt.Errorf("%s source: path is empty", spec.Type)
	}
	if spec.Type == TypeFlexiqSQLite {
		return newFlexiqSQLite(spec)
	}
	return newSQLiteQuery(spec)
}
