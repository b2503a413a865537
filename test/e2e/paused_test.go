package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// decisionID is the MESSAGE_ID of the controller's scaling decisions.
const decisionID = "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01"

// A paused queue's backlog is not demand: a pool whose only queue is paused
// stays at min_workers for the whole pause, its workers claim none of the
// paused jobs, and STATUS= and the decision entries report them as paused,
// apart from pending. Resuming the queue makes them demand again, and the
// pool scales up.
func TestPausedQueueIsNotDemand(t *testing.T) {
	parallel(t)
	const pool, backlog = "pausing", 120
	e := setup(t)
	// Paused before the daemon starts, so that the backlog was never demand
	// and the first decision (0 -> min_workers) already sees the pause.
	if err := flexiqdb.PauseQueue(e.DB, flexiqdb.DefaultQueue, "", true); err != nil {
		t.Fatal(err)
	}
	e.Enqueue(backlog, 500*time.Millisecond)
	// Unpaused, 120 jobs at 10 per worker would ask for 12: max_workers.
	e.Configure(e.poolConfig(pool, `
min_workers = 1
max_workers = 5
target_queue_depth_per_worker = 10
threads_per_worker = 1
target_utilisation = 1.0
scale_down_window_sec = 4
`))
	e.StartDaemon()
	e.waitWorkers(pool, 1, 10*time.Second)
	// The daemon has read the queue once the status shows a pending count.
	e.Eventually(10*time.Second, "a pending count in STATUS=", func() (bool, string) {
		st := e.UnitProp(daemonUnit, "StatusText")
		return strings.Contains(st, " pending") && !strings.Contains(st, "? pending"), st
	})

	// Several ticks (one a second) with a full backlog, all paused.
	for i := range 6 {
		if ws := e.Workers(pool, "active", "activating"); len(ws) > 1 {
			e.Fatalf("after %d s of a paused backlog: workers %v, want min_workers = 1", i, ws)
		}
		time.Sleep(time.Second)
	}
	for _, status := range []int{flexiqdb.StatusRunning, flexiqdb.StatusComplete} {
		if n, err := flexiqdb.Count(e.DB, status); err != nil || n != 0 {
			t.Errorf("%d jobs with status %d, %v: the worker claimed jobs of a paused queue", n, status, err)
		}
	}

	// The paused jobs are reported apart from pending.
	// (STATUS= follows the ticks within a watchdog period, hence the wait.)
	wantStatus := fmt.Sprintf("%s 1/5 workers, 0 pending, %d paused", pool, backlog)
	if ok, st := sandbox.Eventually(5*time.Second, func() (bool, string) {
		st := e.UnitProp(daemonUnit, "StatusText")
		return strings.Contains(st, wantStatus), st
	}); !ok {
		e.Errorf("StatusText = %q, want it to contain %q", st, wantStatus)
	}
	var sawPaused bool
	for _, en := range e.Entries("FLEXIQ_POOL="+pool, decisionID) {
		if en.Field("FLEXIQ_PAUSED") == strconv.Itoa(backlog) && en.Field("FLEXIQ_PENDING") == "0" {
			sawPaused = true
		}
	}
	if !sawPaused {
		e.Errorf("no decision entry of pool %s with FLEXIQ_PAUSED=%d and FLEXIQ_PENDING=0", pool, backlog)
	}

	// Resumed, the backlog is demand again.
	if err := flexiqdb.PauseQueue(e.DB, flexiqdb.DefaultQueue, "", false); err != nil {
		t.Fatal(err)
	}
	e.waitWorkers(pool, 5, 20*time.Second)
	var scaledUp bool
	for _, en := range e.Entries("FLEXIQ_POOL="+pool, decisionID) {
		if en.Field("FLEXIQ_ACTION") == "scale-up" && en.Field("FLEXIQ_DESIRED") == "5" {
			pending, _ := strconv.Atoi(en.Field("FLEXIQ_PENDING"))
			scaledUp = scaledUp || pending > 0
		}
	}
	if !scaledUp {
		e.Errorf("no scale-up decision to 5 with the resumed jobs pending")
	}
	// ", N paused" is there only while something is paused.
	if ok, st := sandbox.Eventually(5*time.Second, func() (bool, string) {
		st := e.UnitProp(daemonUnit, "StatusText")
		return strings.HasPrefix(st, pool+" ") && !strings.Contains(st, "paused"), st
	}); !ok {
		e.Errorf("StatusText = %q after the resume, want no paused count", st)
	}
}
