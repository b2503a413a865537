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
	// Observe reads the queue's counts as of now. Any error means "no data":
	// the controller holds. Errors name the source, the server and what
	// failed.
	Observe(ctx context.Context, now time.Time) (Counts, error)
	Close() error
}

// Watcher is implemented by sources that can tell when work may have
// arrived (inotify on a SQLite file, Redis keyspace notifications, Postgres
// LISTEN), so that a pool ticks early instead of waiting out its poll
// interval. Polling stays the fallback: a lost or missing notification only
// costs latency.
type Watcher interface {
	// Watch calls wake whenever work may have arrived, until ctx ends. wake
	// never blocks and may be called as often as events come; the pool
	// rate-limits its extra ticks. Watch returns at once with how it
	// watches ("inotify on /var/lib/q.db-wal"), or an error saying why it
	// cannot (the pool then polls only, and says so in the journal).
	Watch(ctx context.Context, wake func()) (string, error)
}

// opener opens one source type.
type opener func(spec config.Source) (Source, error)

var openers = map[string]opener{}

// register adds a source type; each type's file registers itself from an
// init function, as KEDA's scalers do.
func register(typ string, open opener) {
	if _, dup := openers[typ]; dup {
		panic("source: type registered twice: " + typ)
	}
	openers[typ] = open
}

// Caps are what a source type can do besides Observe: each is an optional
// interface its sources implement. A type declares them once, in its
// define: config learns from them what the type's pools may ask
// (threads_per_worker = "auto", demand = "littles-law", promql()), and New
// refuses a source that does not implement exactly what its type declared,
// so that the declaration and the code cannot drift apart.
type Caps uint8

const (
	Watches        Caps = 1 << iota // Watcher: tells when work may have arrived
	ReportsThreads                  // ThreadsReporter: threads_per_worker = "auto"
	ReadsDemand                     // DemandReader: demand = "littles-law"
	Queries                         // Querier: serves the rules' promql()
)

// capsOf is what src implements.
func capsOf(src Source) Caps {
	var c Caps
	if _, ok := src.(Watcher); ok {
		c |= Watches
	}
	if _, ok := src.(ThreadsReporter); ok {
		c |= ReportsThreads
	}
	if _, ok := src.(DemandReader); ok {
		c |= ReadsDemand
	}
	if _, ok := src.(Querier); ok {
		c |= Queries
	}
	return c
}

// define registers a source type once: config learns its keys, what it
// can do (caps), and the checks that decode its table into settings S, and
// New its opener, which receives those settings.
func define[S any](t config.SourceType, caps Caps, decode func(d *config.SourceDecoder) S, open func(S) (Source, error)) {
	if t.Threads || t.PromQL || t.Demand {
		panic("source: type " + t.Name + " declares its capabilities in config.SourceType: declare them in caps")
	}
	t.Threads, t.Demand, t.PromQL = caps&ReportsThreads != 0, caps&ReadsDemand != 0, caps&Queries != 0
	t.Decode = func(d *config.SourceDecoder) any { return decode(d) }
	config.RegisterSourceType(t)
	register(t.Name, func(spec config.Source) (Source, error) {
		var settings S
		if spec.Settings != nil {
			var ok bool
			if settings, ok = spec.Settings.(S); !ok {
				return nil, fmt.Errorf("%s source: settings are a %T, not a %T", spec.Type, spec.Settings, settings)
			}
		}
		src, err := open(settings)
		if err == nil {
			if err = checkCaps(spec.Type, src, caps); err != nil {
				src.Close()
				return nil, err
			}
		}
		return src, err
	})
}

// checkCaps refuses a source that does not implement exactly what its type
// declared: a bug, which every test that opens the type finds.
func checkCaps(typ string, src Source, caps Caps) error {
	if got := capsOf(src); got != caps {
		return fmt.Errorf("%s source: declares capabilities %04b, implements %04b (Watches, ReportsThreads, ReadsDemand, Queries from the right)", typ, caps, got)
	}
	return nil
}

// New returns the source spec describes, guarded (Guard: a panic in it is
// an error, not the daemon's end). It does not touch the database or the
// server: one that is not there yet is an Observe error, not a New error,
// so the daemon can start before the queue has.
func New(spec config.Source) (Source, error) {
	open, ok := openers[spec.Type]
	if !ok {
		return nil, fmt.Errorf("unknown source type %q", spec.Type)
	}
	src, err := open(spec)
	if err != nil {
		return nil, err
	}
	return Guard(src, spec.Type, nil), nil
}
