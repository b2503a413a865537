package workers

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

const (
	startTimeout = units.StartTimeout // one start job, Type=exec: the exec itself
	callTimeout  = units.CallTimeout  // one D-Bus round trip
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

// A Clock tells the pool the time. Every window, backoff and age in the
// controller is measured against it.
type Clock func() time.Time

func monoTime(d time.Duration) time.Time { return time.Unix(0, 0).Add(d) }

func monoSince(t time.Time) time.Duration { return t.Sub(time.Unix(0, 0)) }

// dryRun says whether the pool decides without acting (mode = "dry-run").
func dryRun(cfg *config.Pool) bool { return cfg.Mode == config.ModeDryRun }
