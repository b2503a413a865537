package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// lifecycleID is eventlog.Lifecycle's MESSAGE_ID.
const lifecycleID = "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b07"

// wakeUpLine waits for the pool's journal line saying whether wake-up is
// active, and returns it: the running daemon's, not a line of an earlier
// test's daemon in the same sandbox.
func (e *env) wakeUpLine(pool string) string {
	e.T.Helper()
	var line string
	e.Eventually(15*time.Second, "journal line on the pool's wake-up", func() (bool, string) {
		for _, en := range e.Entries("FLEXIQ_POOL="+pool, lifecycleID, fmt.Sprintf("_PID=%d", e.DaemonPID())) {
			if m := en.Field("MESSAGE"); strings.Contains(m, "wake-up is") {
				line = m
				return true, ""
			}
		}
		return false, ""
	})
	return line
}

// With a 30 s poll, a burst into a flexiq-sqlite pool gets its first new
// worker within seconds: inotify on the database's -wal wakes the pool, in
// the daemon's hardened unit, through the bind mount the database is shown
// to the sandbox by.
func TestWakeUpOnBurst(t *testing.T) {
	parallel(t)
	e := setup(t)
	e.Configure(e.poolConfig("wake", `
poll_interval_sec = 30
min_workers = 1
max_workers = 3
target_queue_depth_per_worker = 5
`))
	e.StartDaemon()
	e.waitWorkers("wake", 1, 15*time.Second)
	line := e.wakeUpLine("wake")
	want := fmt.Sprintf("pool=wake wake-up is active: inotify on %s, %s-wal", e.DBPath, e.DBPath)
	if !strings.Contains(line, want) {
		e.Fatalf("journal says %q, want it to contain %q", line, want)
	}

	// The pool's first tick was at its start; the next poll is about 30 s
	// away, so a second worker within 10 s can only come from a wake-up.
	landed := time.Now()
	e.Enqueue(20, 5*time.Second)
	e.Eventually(10*time.Second, "second worker (the poll alone would take up to 30 s)", func() (bool, string) {
		ws := e.Workers("wake", "active")
		return len(ws) >= 2, fmt.Sprintf("active: %v", ws)
	})
	t.Logf("burst → second worker active in %s (poll_interval_sec = 30)", time.Since(landed).Round(10*time.Millisecond))
}
