package units_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// ignoreTerm is a worker that ignores SIGTERM, so only SIGKILL stops it.
func ignoreTerm(pool string, slot int, timeout time.Duration) units.WorkerSpec {
	return units.WorkerSpec{
		Pool: pool, Slot: slot,
		Exec:        []string{"/bin/sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`},
		StopTimeout: timeout,
	}
}

// startIgnoringTerm starts s and waits until its shell has SIGTERM ignored,
// returning the unit and its main PID.
func startIgnoringTerm(t *testing.T, ctx context.Context, m *units.Manager, sb *sandbox.Sandbox, s units.WorkerSpec) (string, string) {
	t.Helper()
	unit := start(t, ctx, m, sb, s)
	w, _ := listed(t, ctx, m, s.Pool, unit)
	pid := utoa(w.MainPID)
	waitFor(t, ctx, "SIGTERM to be ignored", func() bool {
		out, err := sb.Exec(ctx, "grep", "^SigIgn:", "/proc/"+pid+"/status")
		if err != nil {
			return false
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(out, "SigIgn:")), 16, 64)
		return err == nil && mask&(1<<(15-1)) != 0
	})
	return unit, pid
}

// StopTimeout 0 means no limit (defect 2 of issue 7): a worker that does not
// drain is still there, stopping, after 120 s, past systemd's 90 s default.
// This test takes those 120 s, in parallel with the rest of the package.
func TestStopTimeoutZeroIsInfinite(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 3*time.Minute)
	m := newManager(t, sb)

	unit, pid := startIgnoringTerm(t, ctx, m, sb, ignoreTerm("forever", 1, 0))
	// The stop job never ends by itself: kill the worker for cleanup, before
	// removeUnit (registered earlier, so run later) stops it.
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = sb.Exec(cctx, "systemctl", "kill", "--kill-who=all", "--signal=SIGKILL", unit)
	})
	if got := show(t, ctx, sb, unit, "TimeoutStopUSec")["TimeoutStopUSec"]; got != "infinity" {
		t.Fatalf("TimeoutStopUSec=%s, want infinity", got)
	}
	ch, err := m.StopWorker(ctx, unit)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	// Past systemd's 90 s default is what proves "no limit"; the fault
	// suite (test/faults, TestDrainTimeoutZeroNeverKills) waits that long
	// against the daemon in every run. Here the property and a stop that
	// outlasts a short wait suffice, unless FLEXIQ_LONG_TESTS asks for the
	// full 120 s.
	wait := 10 * time.Second
	if os.Getenv("FLEXIQ_LONG_TESTS") != "" {
		wait = 120 * time.Second
	}
	for time.Since(t0) < wait {
		select {
		case r := <-ch:
			t.Fatalf("stop job ended (%s) after %v; want no limit", r, time.Since(t0).Round(time.Second))
		case <-time.After(5 * time.Second):
		}
		// The same process, still there, with the unit still stopping.
		got := show(t, ctx, sb, unit, "ActiveState", "SubState", "MainPID")
		if got["ActiveState"] != "deactivating" || got["SubState"] != "stop-sigterm" || got["MainPID"] != pid {
			t.Fatalf("after %v: %v, want deactivating/stop-sigterm with MainPID %s", time.Since(t0).Round(time.Second), got, pid)
		}
	}
	t.Logf("%s still stopping after %v", unit, time.Since(t0).Round(time.Second))
}

// A positive StopTimeout SIGKILLs a worker that does not drain when it
// runs out, and the unit's Result says so.
func TestStopTimeoutKills(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 30*time.Second)
	m := newManager(t, sb)

	const timeout = 2 * time.Second
	unit, _ := startIgnoringTerm(t, ctx, m, sb, ignoreTerm("killed", 1, timeout))
	if got := show(t, ctx, sb, unit, "TimeoutStopUSec")["TimeoutStopUSec"]; got != "2s" {
		t.Fatalf("TimeoutStopUSec=%s, want 2s", got)
	}
	t0 := time.Now()
	ch, err := m.StopWorker(ctx, unit)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatal("no stop job result")
	}
	took := time.Since(t0)
	t.Logf("stop took %v", took.Round(time.Millisecond))
	if took < timeout-time.Second || took > timeout+time.Second {
		t.Errorf("SIGKILL after %v, want %v ± 1s", took, timeout)
	}
	w, ok := listed(t, ctx, m, "killed", unit)
	if !ok || w.Result != "timeout" || w.ExecMainCode != 2 || w.ExecMainStatus != 9 {
		t.Errorf("after the stop: listed %v, result %q, ExecMainCode %d, ExecMainStatus %d; want timeout, killed (2) by SIGKILL (9)",
			ok, w.Result, w.ExecMainCode, w.ExecMainStatus)
	}
}
