package controller

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/flexiq/flexiq-scaled/internal/controller/workers"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Units is what a pool needs from systemd (package workers, which calls
// it); a Clock tells the pool the time.
type (
	Units = workers.Units
	Clock = workers.Clock
)

var _ Units = (*units.Manager)(nil)

// MonotonicClock is CLOCK_MONOTONIC as a time.Time counted from the Unix
// epoch. The controller's notion of "now" is deliberately not the wall clock:
// a wall-clock jump (NTP stepping, an admin's date -s) must neither expire a
// stabilisation window nor stretch a backoff. It is also the clock systemd
// reports unit timestamps in (ActiveEnterTimestampMonotonic), and, since it
// is shared by every process on the host until the next boot, the clock the
// state file in /run (a tmpfs, itself gone at reboot) can be read back in.
func MonotonicClock() time.Time {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return monoTime(time.Duration(ts.Nano()))
}

func monoTime(d time.Duration) time.Time { return time.Unix(0, 0).Add(d) }

func monoSince(t time.Time) time.Duration { return t.Sub(time.Unix(0, 0)) }
