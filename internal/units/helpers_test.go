package units_test

import (
	"context"
	"sync"

	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

func TestMain(m *testing.M) {
	os.Exit(sandbox.Main(m, sandbox.Options{Name: "units"}))
}

// newManager connects a Manager to the sandbox's systemd, reading cgroups
// through the sandbox's root as the daemon reads its own host's.
func newManager(t testing.TB, sb *sandbox.Sandbox) *units.Manager {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := units.Connect(ctx, units.Options{
		Dial:       sb.BusConn,
		CgroupRoot: fmt.Sprintf("/proc/%d/root/sys/fs/cgroup", sb.PID),
		OpenPIDFD:  sandboxPIDFD(sb),
	})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(m.Close)
	return m
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sleeper is a worker that does nothing until stopped.
func sleeper(pool string, slot int) units.WorkerSpec {
	return units.WorkerSpec{Pool: pool, Slot: slot, Exec: []string{"/bin/sleep", "1000"}, StopTimeout: 5 * time.Second}
}

// start starts a worker and makes sure it is gone (stopped, failed state
// reset) when the test ends.
func start(t *testing.T, ctx context.Context, m *units.Manager, sb *sandbox.Sandbox, s units.WorkerSpec) string {
	t.Helper()
	unit := units.UnitName(s.Pool, s.Slot)
	if err := m.StartWorker(ctx, s); err != nil {
		t.Fatalf("StartWorker(%s): %v", unit, err)
	}
	t.Cleanup(func() { removeUnit(t, sb, unit) })
	return unit
}

// removeUnit stops a unit and clears its failed state, through systemctl
// so that cleanup does not depend on the code under test.
func removeUnit(t *testing.T, sb *sandbox.Sandbox, unit string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, _ = sb.Exec(ctx, "systemctl", "stop", unit)
	_, _ = sb.Exec(ctx, "systemctl", "reset-failed", unit)
}

// show returns `systemctl show` properties of unit.
func show(t *testing.T, ctx context.Context, sb *sandbox.Sandbox, unit string, props ...string) map[string]string {
	t.Helper()
	argv := []string{"systemctl", "show", unit}
	for _, p := range props {
		argv = append(argv, "-p", p)
	}
	out, err := sb.Exec(ctx, argv...)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// waitFor polls cond until it holds, failing the test at ctx's end.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// listed returns the worker named unit from ListWorkers(pool), if listed.
func listed(t *testing.T, ctx context.Context, m *units.Manager, pool, unit string) (units.Worker, bool) {
	t.Helper()
	ws, err := m.ListWorkers(ctx, pool)
	if err != nil {
		t.Fatalf("ListWorkers(%q): %v", pool, err)
	}
	for _, w := range ws {
		if w.Unit == unit {
			return w, true
		}
	}
	return units.Worker{}, false
}

func utoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// sandboxPIDFD opens pidfds for PIDs as the sandbox's systemd numbers them:
// this process lives in the host's PID namespace, so each PID is mapped to
// the host's first (the map is read again when a PID is not in it).
func sandboxPIDFD(sb *sandbox.Sandbox) func(uint32) (int, error) {
	var (
		mu    sync.Mutex
		hosts map[int]int
	)
	return func(pid uint32) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		host, ok := hosts[int(pid)]
		if !ok {
			hosts = sb.HostPIDs()
			if host, ok = hosts[int(pid)]; !ok {
				return -1, fmt.Errorf("sandbox PID %d: no such process", pid)
			}
		}
		return unix.PidfdOpen(host, 0)
	}
}
