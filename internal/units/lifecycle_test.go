package units_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

func TestStopWorker(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 30*time.Second)
	m := newManager(t, sb)

	t.Run("clean", func(t *testing.T) {
		t.Parallel()
		unit := start(t, ctx, m, sb, sleeper("stop", 1))
		ch, err := m.StopWorker(ctx, unit)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-ch:
			if r != "done" {
				t.Fatalf("stop job result %q, want done", r)
			}
		case <-ctx.Done():
			t.Fatal("no stop job result")
		}
		// A cleanly stopped unit is unloaded, so it is no longer listed.
		waitFor(t, ctx, unit+" to be unloaded", func() bool {
			_, ok := listed(t, ctx, m, "stop", unit)
			return !ok
		})
	})

	// KillMode=mixed sends the stop signal to the main process only, which
	// here ignores it; after TimeoutStopUSec the whole cgroup gets SIGKILL.
	t.Run("ignores SIGTERM", func(t *testing.T) {
		t.Parallel()
		s := units.WorkerSpec{
			Pool: "stop", Slot: 2,
			Exec:        []string{"/bin/sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`},
			KillSignal:  15,
			StopTimeout: 2 * time.Second,
		}
		unit := start(t, ctx, m, sb, s)
		w, _ := listed(t, ctx, m, "stop", unit)
		// Make sure the trap is in place before stopping.
		waitFor(t, ctx, "SIGTERM to be ignored", func() bool {
			out, err := sb.Exec(ctx, "grep", "^SigIgn:", "/proc/"+utoa(w.MainPID)+"/status")
			if err != nil {
				return false
			}
			mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(out, "SigIgn:")), 16, 64)
			return err == nil && mask&(1<<(15-1)) != 0
		})
		t0 := time.Now()
		ch, err := m.StopWorker(ctx, unit)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-ch:
			if r != "done" {
				t.Errorf("stop job result %q, want done", r)
			}
		case <-ctx.Done():
			t.Fatal("no stop job result")
		}
		took := time.Since(t0)
		if took < 2*time.Second || took > 6*time.Second {
			t.Errorf("stop took %v, want a little over the 2s stop timeout", took)
		}
		w, ok := listed(t, ctx, m, "stop", unit)
		if !ok {
			t.Fatalf("%s not listed after a timed-out stop; failed units must stay loaded", unit)
		}
		if w.ActiveState != "failed" || w.Result != "timeout" || w.ExecMainCode != 2 || w.ExecMainStatus != 9 {
			t.Errorf("after stop: %s, result %s, ExecMainCode %d, ExecMainStatus %d; want failed, timeout, 2 (killed), 9 (SIGKILL)",
				w.ActiveState, w.Result, w.ExecMainCode, w.ExecMainStatus)
		}
	})
}

// Type=exec makes the start job itself fail for a command or user that does
// not exist, and the failed unit left behind does not block its slot.
func TestStartFailures(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 30*time.Second)
	m := newManager(t, sb)

	for _, tc := range []struct {
		name   string
		spec   units.WorkerSpec
		status int32 // systemd's EXIT_EXEC / EXIT_USER
	}{
		{"missing binary", units.WorkerSpec{Pool: "bad", Slot: 1, Exec: []string{"/nonexistent"}}, 203},
		{"missing user", units.WorkerSpec{Pool: "bad", Slot: 2, Exec: []string{"/bin/sleep", "1000"}, User: "flexiq-no-such-user"}, 217},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			unit := units.UnitName(tc.spec.Pool, tc.spec.Slot)
			t.Cleanup(func() { removeUnit(t, sb, unit) })
			err := m.StartWorker(ctx, tc.spec)
			if err == nil {
				t.Fatal("StartWorker succeeded")
			}
			if msg := err.Error(); !strings.Contains(msg, unit) || !strings.Contains(msg, "failed") || !strings.Contains(msg, strconv.Itoa(int(tc.status))) {
				t.Errorf("error %q should name %s, the failure and exit status %d", msg, unit, tc.status)
			}
			w, ok := listed(t, ctx, m, "bad", unit)
			if !ok || w.ActiveState != "failed" || w.ExecMainStatus != tc.status {
				t.Fatalf("after the failed start: listed %v, %+v; want failed with status %d", ok, w, tc.status)
			}
			// The failed unit is still loaded, so this start meets
			// UnitExists first and must reset the unit to succeed.
			good := sleeper(tc.spec.Pool, tc.spec.Slot)
			if err := m.StartWorker(ctx, good); err != nil {
				t.Fatalf("restarting the slot with a good spec: %v", err)
			}
			w, ok = listed(t, ctx, m, "bad", unit)
			if !ok || w.ActiveState != "active" {
				t.Fatalf("after the second start: listed %v, %+v", ok, w)
			}
			// A live unit is not reset away: its slot is taken.
			err = m.StartWorker(ctx, good)
			if !errors.Is(err, units.ErrUnitExists) || !strings.Contains(err.Error(), "active") {
				t.Errorf("starting a running slot again: %v, want ErrUnitExists naming the state", err)
			}
			if w2, _ := listed(t, ctx, m, "bad", unit); w2.InvocationID != w.InvocationID {
				t.Errorf("the running unit was replaced: invocation %s → %s", w.InvocationID, w2.InvocationID)
			}
		})
	}
}

// A worker that exits with an error after starting stays loaded, failed,
// with its exit status, until ResetFailed.
func TestCrashingWorker(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 30*time.Second)
	m := newManager(t, sb)

	unit := start(t, ctx, m, sb, units.WorkerSpec{Pool: "crash", Slot: 1, Exec: []string{"/bin/sh", "-c", "sleep 0.2; exit 3"}})
	var w units.Worker
	waitFor(t, ctx, unit+" to fail", func() bool {
		var ok bool
		w, ok = listed(t, ctx, m, "crash", unit)
		return ok && w.ActiveState == "failed"
	})
	if w.Result != "exit-code" || w.ExecMainCode != 1 || w.ExecMainStatus != 3 || w.MainPID != 0 {
		t.Errorf("crashed worker: result %q, ExecMainCode %d, ExecMainStatus %d, MainPID %d; want exit-code, 1 (exited), 3, 0",
			w.Result, w.ExecMainCode, w.ExecMainStatus, w.MainPID)
	}
	if err := m.ResetFailed(ctx, unit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, unit+" to be unloaded", func() bool {
		_, ok := listed(t, ctx, m, "crash", unit)
		return !ok
	})
	if err := m.ResetFailed(ctx, unit); err == nil || !strings.Contains(err.Error(), unit) {
		t.Errorf("ResetFailed of an unloaded unit: %v, want an error naming it", err)
	}
}
