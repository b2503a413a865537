package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// Most of the suite's time is waiting: for ticks, drains, servers. The
// tests that only wait with generous deadlines run two at a time, after the
// others (Go runs the parallel tests once the serial ones are done), each
// in a sandbox of its own: the daemon is one unit with one configuration,
// so two tests never share a sandbox at once. The serial tests keep the
// machine to themselves: those that load the CPU (the host guard's
// stress-ng, a busy worker, a slow query), that read the host's load, or
// that assert on short time windows (crash backoff, quiet period, start
// condition retries, the watchdog, the fleet stores' lease expiry).
var (
	// free holds the sandboxes no parallel test is using: the package's
	// own (sandbox.Main's) and a second one, booted at the first parallel
	// test.
	free      = make(chan *sandbox.Sandbox, 2)
	freeOnce  sync.Once
	secondErr error
	second    *sandbox.Sandbox
	// taken maps a parallel test to its sandbox, for setup.
	taken sync.Map
)

// parallel marks t as a test that runs beside another one, and returns the
// sandbox it has to itself until it ends (and its cleanups have run).
func parallel(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	first := sandbox.Get(t) // skips without sandboxes
	t.Parallel()
	freeOnce.Do(func() {
		free <- first
		second, secondErr = bootSecond(first)
		if secondErr == nil {
			free <- second
		}
	})
	if secondErr != nil {
		t.Fatalf("booting the parallel tests' second sandbox: %v", secondErr)
	}
	sb := <-free
	// Registered first, so it runs last: after setup's cleanup has
	// stopped the daemon and removed the test's units.
	t.Cleanup(func() { taken.Delete(t); free <- sb })
	taken.Store(t, sb)
	return sb
}

// sandboxFor is t's sandbox: its own if it is a parallel test, else the
// package's.
func sandboxFor(t testing.TB) *sandbox.Sandbox {
	if sb, ok := taken.Load(t); ok {
		return sb.(*sandbox.Sandbox)
	}
	return sandbox.Get(t)
}

// bootSecond boots the second sandbox like the first: the same binds, owned
// by this process.
func bootSecond(first *sandbox.Sandbox) (*sandbox.Sandbox, error) {
	name := fmt.Sprintf("e2e-b-%d", os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	sb, err := sandbox.Start(ctx, sandbox.Options{Name: name, Binds: binds, OwnerPID: os.Getpid()})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "sandbox %s booted in %.2fs (pid %d, %s), beside %s\n", sb.Name, time.Since(t0).Seconds(), sb.PID, sb.SystemState, first.Name)
	return sb, nil
}

// stopSecond stops the second sandbox, if the run booted one.
func stopSecond() error {
	if second == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return second.Stop(ctx)
}
