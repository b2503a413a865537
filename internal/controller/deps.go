package controller

import (
	"context"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Units is what a pool needs from systemd. *units.Manager is the real one;
// the controller's tests drive a fake with the same semantics, so the
// lifecycle rules get fast table tests and the sandbox suite proves them
// against the real systemd.
type Units interface {
	// ListWorkers lists the pool's loaded worker units in any state.
	ListWorkers(ctx context.Context, pool string) ([]units.Worker, error)
	// StartWorker starts a worker and waits for its start job. An error
	// wrapping units.ErrUnitExists means the name is still taken.
	StartWorker(ctx context.Context, s units.WorkerSpec) error
	// StopWorker queues a stop job and returns at once.
	StopWorker(ctx context.Context, unit string) (<-chan string, error)
	ResetFailed(ctx context.Context, unit string) error
	CPUUsage(w units.Worker) (time.Duration, error)
	// UnitStates reads the ActiveState of units a pool requires.
	UnitStates(ctx context.Context, names []string) (map[string]string, error)
	// KillMain sends a signal to a unit's main process (the quiet phase).
	KillMain(ctx context.Context, unit string, signal int) error
	// ControlGroup reads a running unit's cgroup path, whose listeners a
	// replica's ports may have (portguard.go), before a listing says it.
	ControlGroup(ctx context.Context, unit string) (string, error)
}

var _ Units = (*units.Manager)(nil)

// A Clock tells the pool the time. Every window, backoff and age in the
// controller is measured against it.
type Clock func() time.Time

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
