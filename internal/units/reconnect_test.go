package units_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// The Manager outlives systemd re-executing itself and the bus daemon
// restarting. This test is not parallel: it runs while the parallel tests
// wait, so their connections are not pulled away in the middle of a check.
func TestReconnect(t *testing.T) {
	sb := sandbox.Get(t)
	ctx := testContext(t, 60*time.Second)
	m := newManager(t, sb)
	const pool = "reconn"

	first := start(t, ctx, m, sb, sleeper(pool, 1))
	w0, ok := listed(t, ctx, m, pool, first)
	if !ok || w0.InvocationID == "" {
		t.Fatalf("%s not listed: %+v", first, w0)
	}
	check := func(step string, slot int) {
		t.Helper()
		w, ok := listed(t, ctx, m, pool, first)
		if !ok || w.InvocationID != w0.InvocationID || w.ActiveState != "active" {
			t.Fatalf("after %s: %s listed %v as %+v; want it still active with invocation %s", step, first, ok, w, w0.InvocationID)
		}
		// A start needs the job-result signal too, on whatever connection
		// the Manager now has.
		start(t, ctx, m, sb, sleeper(pool, slot))
		if n, err := m.QueuedJob(ctx, first, "stop"); err != nil || n {
			t.Fatalf("after %s: QueuedJob = %v, %v", step, n, err)
		}
	}

	t.Run("daemon-reexec", func(t *testing.T) {
		// Keep calling while systemd leaves the bus and comes back: no
		// call may fail.
		done := make(chan error, 1)
		go func() {
			_, err := sb.Exec(ctx, "systemctl", "daemon-reexec")
			done <- err
		}()
		calls := 0
		for finished := false; !finished; calls++ {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				finished = true
			default:
			}
			if _, err := m.ListWorkers(ctx, pool); err != nil {
				t.Fatalf("ListWorkers during daemon-reexec (call %d): %v", calls, err)
			}
		}
		t.Logf("%d calls during daemon-reexec", calls)
		check("daemon-reexec", 2)
	})

	t.Run("dbus restart", func(t *testing.T) {
		before := m.Reconnects()
		if _, err := sb.Exec(ctx, "systemctl", "restart", "dbus.service"); err != nil {
			t.Fatal(err)
		}
		check("dbus restart", 3)
		if m.Reconnects() <= before {
			t.Errorf("Reconnects() = %d, was %d: the old connection cannot have survived a bus restart", m.Reconnects(), before)
		}
	})

	m.Close()
	if _, err := m.ListWorkers(ctx, pool); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("ListWorkers after Close: %v, want a closed error", err)
	}
	if err := m.StartWorker(ctx, sleeper(pool, 9)); err == nil {
		t.Error("StartWorker after Close succeeded")
	}
}

// A start whose job is still running when the bus daemon restarts: the
// job's result signal dies with the connection it would have come on, and
// the start must learn the job's end from systemd instead of waiting out
// its timeout (30 s) for a signal that cannot come.
func TestStartAcrossBusRestart(t *testing.T) {
	sb := sandbox.Get(t)
	ctx := testContext(t, 90*time.Second)
	m := newManager(t, sb)
	const pool = "busgone"

	s := sleeper(pool, 1)
	// The start job lasts while ExecCondition runs: 3 s.
	s.StartCondition = []string{"/bin/sleep", "3"}
	unit := units.UnitName(pool, 1)
	t.Cleanup(func() { removeUnit(t, sb, unit) })
	sctx, cancel := context.WithTimeout(ctx, units.StartTimeout)
	defer cancel()
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- m.StartWorker(sctx, s) }()
	// Restart the bus once systemd has the job.
	if ok, state := sandbox.Poll(10*time.Second, 20*time.Millisecond, func() (bool, string) {
		out, _ := sb.Exec(ctx, "systemctl", "show", "-p", "Job", "--value", unit)
		return strings.TrimSpace(out) != "", out
	}); !ok {
		t.Fatalf("%s never had a start job: %s", unit, state)
	}
	if _, err := sb.Exec(ctx, "systemctl", "restart", "dbus.service"); err != nil {
		t.Fatal(err)
	}
	err := <-done
	took := time.Since(began)
	t.Logf("StartWorker returned after %s: %v", took.Round(time.Millisecond), err)
	if err != nil {
		t.Fatalf("StartWorker across a bus restart: %v (after %s)", err, took.Round(time.Millisecond))
	}
	// The job itself takes 3 s; a lost signal would hold the start until
	// its 30 s timeout. 15 s leaves the machine room and still tells them
	// apart.
	if took > 15*time.Second {
		t.Errorf("StartWorker took %s: it waited for a job signal that the bus restart lost", took.Round(time.Millisecond))
	}
	if w, ok := listed(t, ctx, m, pool, unit); !ok || w.ActiveState != "active" {
		t.Errorf("%s after the start: listed %v as %+v, want active", unit, ok, w)
	}
}
