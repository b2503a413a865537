package controller

import (
	"fmt"
	"strconv"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/decide"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
)

// threadState is what the pool last used for threads_per_worker, so that a
// change is logged once.
type threadState struct {
	n      int
	origin string
	failed bool // the last read failed: logged once, until one succeeds
}

// perWorker is the pool's threads per worker for this tick: the
// configured number, or with threads_per_worker = "auto" what flexiq's live
// workers reported (read: readThreads), falling back to the configured one
// when none is live or the read failed. Every change is logged to log.
func (t *threadState) perWorker(cfg *config.Pool, log *eventlog.Logger, read decide.ThreadsRead) int {
	n, origin := cfg.ThreadsPerWorker, "configured"
	if read.Asked {
		origin = "fallback: no live flexiq worker serves the pool's queues"
		switch {
		case read.Err != nil:
			origin = "fallback: cannot read flexiq's workers"
			if !t.failed {
				log.Event(eventlog.SourceError, eventlog.Warning, eventlog.Fields{"FLEXIQ_ERROR": read.Err.Error()},
					"cannot read its workers' threads, using threads_per_worker_fallback %d: %v", n, read.Err)
			}
		case read.Found:
			n, origin = read.N, "from flexiq's live workers"
		}
		t.failed = read.Err != nil
	}
	if n != t.n || origin != t.origin {
		if t.n != 0 || cfg.ThreadsAuto {
			log.Event(eventlog.Lifecycle, eventlog.Notice, eventlog.Fields{"FLEXIQ_THREADS": strconv.Itoa(n)},
				"threads per worker: %s", describeThreads(n, origin, t.n))
		}
		t.n, t.origin = n, origin
	}
	return n
}

func describeThreads(n int, origin string, was int) string {
	if was == 0 {
		return fmt.Sprintf("%d (%s)", n, origin)
	}
	return fmt.Sprintf("%d, was %d (%s)", n, was, origin)
}
