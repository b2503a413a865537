package units_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// gang is a group of n sleepers in slot, each with its rank and a port of
// its own in its environment.
func gang(pool string, slot, n int) units.WorkerSpec {
	s := sleeper(pool, slot)
	s.Environment = map[string]string{"FLEXIQ_GROUP_SIZE": fmt.Sprint(n)}
	for r := 0; r < n; r++ {
		s.Ranks = append(s.Ranks, units.RankSpec{Environment: map[string]string{
			"FLEXIQ_RANK":      fmt.Sprint(r),
			"FLEXIQ_PORT_HTTP": fmt.Sprint(8000 + 10*slot + r),
		}})
	}
	return s
}

// groupUnits names every rank's unit.
func groupUnits(pool string, slot, n int) []string {
	out := []string{units.UnitName(pool, slot)}
	for r := 1; r < n; r++ {
		out = append(out, units.RankUnitName(pool, slot, r))
	}
	return out
}

// removeGroup stops and resets every rank, through systemctl.
func removeGroup(t *testing.T, sb *sandbox.Sandbox, pool string, slot, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	argv := append([]string{"systemctl", "stop"}, groupUnits(pool, slot, n)...)
	_, _ = sb.Exec(ctx, argv...)
	argv[1] = "reset-failed"
	_, _ = sb.Exec(ctx, argv...)
}

// startGroup starts s and removes its ranks when the test ends.
func startGroup(t *testing.T, ctx context.Context, m *units.Manager, sb *sandbox.Sandbox, s units.WorkerSpec) {
	t.Helper()
	t.Cleanup(func() { removeGroup(t, sb, s.Pool, s.Slot, len(s.Ranks)) })
	if err := m.StartWorker(ctx, s); err != nil {
		t.Fatalf("StartWorker(group %s/%d): %v", s.Pool, s.Slot, err)
	}
}

// groupLive reports the ranks of slot that systemd has not finished with
// (active, activating, deactivating, reloading), as systemctl sees them.
func groupLive(t *testing.T, ctx context.Context, sb *sandbox.Sandbox, pool string, slot, n int) []string {
	t.Helper()
	var live []string
	for _, u := range groupUnits(pool, slot, n) {
		st := show(t, ctx, sb, u, "ActiveState")["ActiveState"]
		if st != "inactive" && st != "failed" {
			live = append(live, u+" "+st)
		}
	}
	return live
}

// A group of 3 lists as one Worker, rank 0, with its two other ranks, each
// with the environment it was started with, read back by a fresh Manager
// as after a daemon restart.
func TestGangGroupListing(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 60*time.Second)
	m := newManager(t, sb)

	startGroup(t, ctx, m, sb, gang("gang", 1, 3))
	// Every rank is read once, then kept while it runs (cache.go).
	if _, err := m.ListWorkers(ctx, "gang"); err != nil {
		t.Fatal(err)
	}
	reads := m.PropertyReads()
	for _, mgr := range []*units.Manager{m, newManager(t, sb)} {
		ws, err := mgr.ListWorkers(ctx, "gang")
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != 1 || len(ws[0].Ranks) != 2 {
			t.Fatalf("listed %d workers (%+v), want 1 with 2 ranks", len(ws), ws)
		}
		all := append([]units.Worker{ws[0]}, ws[0].Ranks...)
		for r, w := range all {
			want := groupUnits("gang", 1, 3)[r]
			if w.Unit != want || w.Rank != r || w.Slot != 1 || w.ActiveState != "active" || w.MainPID == 0 || (r > 0 && len(w.Ranks) != 0) {
				t.Errorf("rank %d: %s rank %d slot %d %s pid %d, %d ranks; want %s, active", r, w.Unit, w.Rank, w.Slot, w.ActiveState, w.MainPID, len(w.Ranks), want)
			}
			for _, kv := range []string{fmt.Sprintf("FLEXIQ_RANK=%d", r), fmt.Sprintf("FLEXIQ_PORT_HTTP=%d", 8010+r), "FLEXIQ_GROUP_SIZE=3", "FLEXIQ_SCALED_SLOT=1", "FLEXIQ_SCALED_POOL=gang"} {
				if !slices.Contains(w.Environment, kv) {
					t.Errorf("rank %d: Environment %q lacks %s", r, w.Environment, kv)
				}
			}
		}
	}
	if n := m.PropertyReads() - reads; n != 0 {
		t.Errorf("listing a running group again read properties %d times, want 0", n)
	}
	// What the process itself sees.
	w, _ := listed(t, ctx, m, "gang", units.UnitName("gang", 1))
	env, err := sb.Exec(ctx, "cat", fmt.Sprintf("/proc/%d/environ", w.Ranks[1].MainPID))
	if err != nil || !strings.Contains(env, "FLEXIQ_RANK=2\x00") {
		t.Errorf("rank 2's process environment %q (%v) lacks FLEXIQ_RANK=2", env, err)
	}
}

// A rank that fails to start fails the group's start, naming the rank; no
// rank is left running, and the slot can be started again.
func TestGangGroupAllOrNothing(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 60*time.Second)
	m := newManager(t, sb)

	bad := gang("gangfail", 1, 3)
	// Every rank runs the same command: rank 1's start fails in its
	// ExecCondition= (255 is a failure, not a skip), before its command
	// runs, as a missing binary fails it in execve().
	bad.StartCondition = []string{"/bin/sh", "-c", `test "$FLEXIQ_RANK" != 1 || exit 255`}
	t.Cleanup(func() { removeGroup(t, sb, "gangfail", 1, 3) })
	err := m.StartWorker(ctx, bad)
	if err == nil {
		t.Fatal("StartWorker succeeded with rank 1 failing")
	}
	var se *units.StartError
	if !asStartError(err, &se) || se.Rank != 1 || se.Unit != units.RankUnitName("gangfail", 1, 1) || se.Result == "" ||
		!strings.Contains(err.Error(), "rank 1") || !strings.Contains(err.Error(), se.Result) {
		t.Fatalf("error %v (%+v): want a StartError of rank 1 naming its Result", err, se)
	}
	t.Logf("group start error: %v", err)
	waitFor(t, ctx, "no rank of the failed group to be live", func() bool {
		return len(groupLive(t, ctx, sb, "gangfail", 1, 3)) == 0
	})
	// The failed rank is kept for its Result, under rank 0's slot.
	w, ok := listed(t, ctx, m, "gangfail", units.UnitName("gangfail", 1))
	if !ok || w.ActiveState == "active" {
		t.Errorf("after the failed start: listed %v, %+v; want the slot listed, not active", ok, w)
	}
	// The slot is free for a good start.
	startGroup(t, ctx, m, sb, gang("gangfail", 1, 3))
	ws, err := m.ListWorkers(ctx, "gangfail")
	if err != nil || len(ws) != 1 || ws[0].ActiveState != "active" || len(ws[0].Ranks) != 2 ||
		ws[0].Ranks[0].ActiveState != "active" || ws[0].Ranks[1].ActiveState != "active" {
		t.Fatalf("after restarting the slot: %+v, %v", ws, err)
	}
}

func asStartError(err error, se **units.StartError) bool {
	for err != nil {
		if e, ok := err.(*units.StartError); ok {
			*se = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// Killing rank 1 stops ranks 0 and 2, by systemd alone (nothing but the
// test runs). The time from the kill to every rank inactive is logged as a
// figure; only a loose bound is asserted.
func TestGangGroupRankExitStopsGroup(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 2*time.Minute)
	m := newManager(t, sb)

	var took []time.Duration
	for slot := 1; slot <= 5; slot++ {
		startGroup(t, ctx, m, sb, gang("gangkill", slot, 3))
		w, ok := listed(t, ctx, m, "gangkill", units.UnitName("gangkill", slot))
		if !ok || len(w.Ranks) != 2 || w.Ranks[0].MainPID == 0 {
			t.Fatalf("slot %d: listed %v, %+v", slot, ok, w)
		}
		// From this process, by the host's PID: the clock starts at the kill.
		host, ok := sb.HostPIDs()[int(w.Ranks[0].MainPID)]
		if !ok {
			t.Fatalf("rank 1's PID %d not found on the host", w.Ranks[0].MainPID)
		}
		t0 := time.Now()
		if err := syscall.Kill(host, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for len(groupLiveFast(t, ctx, m, "gangkill", slot)) > 0 {
			if time.Since(t0) > 10*time.Second {
				t.Fatalf("slot %d: 10 s after killing rank 1, still live: %v", slot, groupLive(t, ctx, sb, "gangkill", slot, 3))
			}
			time.Sleep(5 * time.Millisecond)
		}
		took = append(took, time.Since(t0))
		// Rank 1 failed (SIGKILL), and is listed under its slot until reset.
		w, ok = listed(t, ctx, m, "gangkill", units.UnitName("gangkill", slot))
		if !ok || w.ActiveState != "failed" || w.FailedRank != 1 || w.Result != "signal" || w.ExecMainStatus != 9 {
			t.Errorf("slot %d after the kill: listed %v, %+v; want a failed slot, rank 1 killed by signal 9", slot, ok, w)
		}
		if err := m.ResetFailed(ctx, w.Unit); err != nil {
			t.Errorf("slot %d: ResetFailed(%s): %v", slot, w.Unit, err)
		}
		waitFor(t, ctx, "the slot to be free", func() bool {
			_, ok := listed(t, ctx, m, "gangkill", units.UnitName("gangkill", slot))
			return !ok
		})
	}
	slices.Sort(took)
	t.Logf("kill of rank 1 to all 3 ranks inactive, %d runs: median %v, max %v (all: %v)", len(took), took[len(took)/2], took[len(took)-1], took)
}

// groupLiveFast is groupLive through one ListWorkers call, quick enough
// to time the group's stop.
func groupLiveFast(t *testing.T, ctx context.Context, m *units.Manager, pool string, slot int) []string {
	t.Helper()
	w, ok := listed(t, ctx, m, pool, units.UnitName(pool, slot))
	if !ok {
		return nil
	}
	var live []string
	w.ActiveState = w.UnitActiveState // rank 0's own, not the group's
	for _, r := range append([]units.Worker{w}, w.Ranks...) {
		if !r.Missing && r.ActiveState != "inactive" && r.ActiveState != "failed" {
			live = append(live, r.Unit+" "+r.ActiveState)
		}
	}
	return live
}

// StopWorker of rank 0 stops every rank, each with its own KillSignal and
// stop timeout.
func TestGangGroupStop(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 60*time.Second)
	m := newManager(t, sb)

	s := gang("gangstop", 1, 3)
	// Each rank exits 0 on SIGUSR1, the stop signal, and would die of any
	// other (failed, Result signal).
	s.Exec = []string{"/bin/sh", "-c", `trap "exit 0" USR1; while :; do sleep 0.1; done`}
	s.KillSignal = int(syscall.SIGUSR1)
	s.StopTimeout = 7 * time.Second
	startGroup(t, ctx, m, sb, s)
	for _, u := range groupUnits("gangstop", 1, 3) {
		got := show(t, ctx, sb, u, "KillSignal", "TimeoutStopUSec")
		if got["KillSignal"] != fmt.Sprint(int(syscall.SIGUSR1)) || got["TimeoutStopUSec"] != "7s" {
			t.Errorf("%s: %v, want KillSignal %d and TimeoutStopUSec 7s", u, got, int(syscall.SIGUSR1))
		}
	}
	time.Sleep(300 * time.Millisecond) // the traps in place
	ch, err := m.StopWorker(ctx, units.UnitName("gangstop", 1))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r != "done" {
			t.Errorf("stop job %s", r)
		}
	case <-ctx.Done():
		t.Fatal("no stop job result")
	}
	waitFor(t, ctx, "every rank to stop", func() bool { return len(groupLive(t, ctx, sb, "gangstop", 1, 3)) == 0 })
	// Exited 0 on its own signal: inactive and unloaded, not failed.
	if ws, err := m.ListWorkers(ctx, "gangstop"); err != nil || len(ws) != 0 {
		t.Errorf("after the stop: %+v, %v; want nothing left (a rank not stopped by SIGUSR1 would be failed)", ws, err)
	}
}

// AllowedCPUs reaches systemd as the cpuset it means; it is enforced only
// where the sandbox's cgroup2 has the cpuset controller.
func TestGangGroupAllowedCPUs(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 60*time.Second)
	m := newManager(t, sb)

	s := gang("gangcpu", 1, 2)
	s.Ranks[0].AllowedCPUs = "0"
	s.Ranks[1].AllowedCPUs = "1"
	startGroup(t, ctx, m, sb, s)
	for r, u := range groupUnits("gangcpu", 1, 2) {
		if got := show(t, ctx, sb, u, "AllowedCPUs")["AllowedCPUs"]; got != fmt.Sprint(r) {
			t.Errorf("%s: AllowedCPUs=%q, want %d", u, got, r)
		}
	}
	controllers, _ := sb.Exec(ctx, "cat", "/sys/fs/cgroup/cgroup.controllers")
	got, err := m.CgroupControllers()
	if err != nil || !slices.Equal(got, strings.Fields(controllers)) {
		t.Errorf("CgroupControllers() = %q, %v; want %q", got, err, strings.Fields(controllers))
	}
	if !slices.Contains(strings.Fields(controllers), "cpuset") {
		t.Skipf("AllowedCPUs is set but not enforced here: the sandbox's cgroup2 has no cpuset controller (controllers: %q; a hybrid host binds cpuset to a cgroup v1 hierarchy)", strings.TrimSpace(controllers))
	}
	w, _ := listed(t, ctx, m, "gangcpu", units.UnitName("gangcpu", 1))
	for r, rw := range append([]units.Worker{w}, w.Ranks...) {
		got, err := sb.Exec(ctx, "cat", "/sys/fs/cgroup"+rw.ControlGroup+"/cpuset.cpus.effective")
		if err != nil || strings.TrimSpace(got) != fmt.Sprint(r) {
			t.Errorf("rank %d: cpuset.cpus.effective %q (%v), want %d", r, got, err, r)
		}
	}
}

// notifier sends READY=1 after a delay, from its main process, and then
// sleeps.
func notifier(pool string, slot int, delay time.Duration) units.WorkerSpec {
	script := fmt.Sprintf(`import os, socket, time
time.sleep(%g)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
a = os.environ["NOTIFY_SOCKET"]
s.sendto(b"READY=1", "\0" + a[1:] if a.startswith("@") else a)
time.sleep(1000)
`, delay.Seconds())
	return units.WorkerSpec{Pool: pool, Slot: slot, Exec: []string{"/usr/bin/python3", "-c", script}, NotifyReady: true, StopTimeout: 5 * time.Second}
}

// A NotifyReady worker's start returns at once; it is activating until it
// sends READY=1, and active after. A group's rank 0 too.
func TestNotifyReady(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 60*time.Second)
	m := newManager(t, sb)

	single := notifier("notify", 1, 3*time.Second)
	group := notifier("notify", 2, 3*time.Second)
	group.Ranks = []units.RankSpec{{}, {}}
	for _, s := range []units.WorkerSpec{single, group} {
		t.Run(units.UnitName(s.Pool, s.Slot), func(t *testing.T) {
			t.Parallel()
			t.Cleanup(func() { removeGroup(t, sb, s.Pool, s.Slot, max(1, len(s.Ranks))) })
			t0 := time.Now()
			if err := m.StartWorker(ctx, s); err != nil {
				t.Fatal(err)
			}
			returned := time.Since(t0)
			if got := show(t, ctx, sb, units.UnitName(s.Pool, s.Slot), "TimeoutStartUSec")["TimeoutStartUSec"]; got != "infinity" {
				t.Errorf("TimeoutStartUSec=%s, want infinity", got)
			}
			w, ok := listed(t, ctx, m, s.Pool, units.UnitName(s.Pool, s.Slot))
			if ok && w.ActiveState == "active" && time.Since(t0) < 3*time.Second {
				t.Fatalf("active %v after the start, before READY=1", time.Since(t0))
			}
			if !ok || w.ActiveState != "activating" {
				t.Fatalf("before READY=1: listed %v, %s/%s; want activating", ok, w.ActiveState, w.SubState)
			}
			waitFor(t, ctx, "READY=1", func() bool {
				w, ok = listed(t, ctx, m, s.Pool, units.UnitName(s.Pool, s.Slot))
				return ok && w.ActiveState == "active"
			})
			for _, r := range w.Ranks {
				if r.ActiveState != "active" {
					t.Errorf("%s: %s after READY=1", r.Unit, r.ActiveState)
				}
			}
			t.Logf("StartWorker returned after %v; active after %v", returned, time.Since(t0))
		})
	}
}

// A rank still stopping after rank 0 died keeps the slot taken: the group
// is listed deactivating until every rank is down, then failed, blaming
// rank 0, and ResetFailed of rank 0 frees the slot of every rank.
func TestGangGroupStraggler(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 60*time.Second)
	m := newManager(t, sb)

	s := gang("gangstray", 1, 2)
	// Rank 1 ignores SIGTERM, so its stop lasts the stop timeout.
	s.Exec = []string{"/bin/sh", "-c", `test "$FLEXIQ_RANK" = 0 || trap "" TERM; while :; do sleep 0.1; done`}
	s.StopTimeout = 3 * time.Second
	startGroup(t, ctx, m, sb, s)
	w, _ := listed(t, ctx, m, "gangstray", units.UnitName("gangstray", 1))
	time.Sleep(300 * time.Millisecond) // the trap in place
	if _, err := sb.Exec(ctx, "kill", "-KILL", utoa(w.MainPID)); err != nil {
		t.Fatal(err)
	}
	// Rank 0's own end takes a moment too (systemd stops what is left in
	// its cgroup, the shell's sleep): wait for it to settle while rank 1,
	// which ignores SIGTERM, is still stopping (3 s). CI once sampled
	// rank 0 still deactivating.
	waitFor(t, ctx, "rank 1 to be stopping, rank 0 ended", func() bool {
		w, _ = listed(t, ctx, m, "gangstray", units.UnitName("gangstray", 1))
		return len(w.Ranks) == 1 && w.Ranks[0].ActiveState == "deactivating" && w.UnitActiveState != "deactivating"
	})
	if w.ActiveState != "deactivating" || w.UnitActiveState != "failed" {
		t.Errorf("rank 0 killed, rank 1 stopping: group %s, rank 0 %s; want deactivating, failed", w.ActiveState, w.UnitActiveState)
	}
	waitFor(t, ctx, "rank 1's stop to time out", func() bool {
		w, _ = listed(t, ctx, m, "gangstray", units.UnitName("gangstray", 1))
		return w.ActiveState != "deactivating"
	})
	if w.ActiveState != "failed" || w.FailedRank != 0 || w.Result != "signal" || len(w.Ranks) != 1 || w.Ranks[0].Result != "timeout" {
		t.Errorf("after rank 1's stop timed out: %+v; want failed, blaming rank 0 (signal), rank 1 timeout", w)
	}
	if err := m.ResetFailed(ctx, w.Unit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "every rank to be unloaded", func() bool {
		_, ok := listed(t, ctx, m, "gangstray", units.UnitName("gangstray", 1))
		return !ok
	})
}

// A rank of a NotifyReady group that dies before READY=1 takes the group
// down, by systemd alone, though StartWorker returned long before.
func TestNotifyReadyGroupRankDies(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 60*time.Second)
	m := newManager(t, sb)

	s := notifier("notifydie", 1, 30*time.Second)
	s.Exec = []string{"/bin/sh", "-c", `test "$FLEXIQ_RANK" != 1 || { sleep 1; exit 3; }; exec "$0" "$@"`, s.Exec[0], s.Exec[1], s.Exec[2]}
	s.NotifyReady = true
	s.Ranks = []units.RankSpec{{Environment: map[string]string{"FLEXIQ_RANK": "0"}}, {Environment: map[string]string{"FLEXIQ_RANK": "1"}}, {Environment: map[string]string{"FLEXIQ_RANK": "2"}}}
	t.Cleanup(func() { removeGroup(t, sb, "notifydie", 1, 3) })
	if err := m.StartWorker(ctx, s); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	waitFor(t, ctx, "the group to be down", func() bool {
		return len(groupLive(t, ctx, sb, "notifydie", 1, 3)) == 0
	})
	w, _ := listed(t, ctx, m, "notifydie", units.UnitName("notifydie", 1))
	t.Logf("group down %v after the start; listed %s, failed rank %d (%s)", time.Since(t0), w.ActiveState, w.FailedRank, w.Result)
	if w.ActiveState != "failed" || w.FailedRank != 1 {
		t.Errorf("listed %s, failed rank %d; want failed, rank 1", w.ActiveState, w.FailedRank)
	}
}

// The ranks stop in parallel, not one after another: three ranks that
// each last their whole 2 s stop timeout stop in about 2 s, not 6.
func TestGangGroupStopsInParallel(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 60*time.Second)
	m := newManager(t, sb)

	s := gang("gangpar", 1, 3)
	s.Exec = []string{"/bin/sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`}
	s.StopTimeout = 2 * time.Second
	startGroup(t, ctx, m, sb, s)
	time.Sleep(300 * time.Millisecond) // the traps in place
	t0 := time.Now()
	if _, err := m.StopWorker(ctx, units.UnitName("gangpar", 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "every rank to stop", func() bool { return len(groupLive(t, ctx, sb, "gangpar", 1, 3)) == 0 })
	took := time.Since(t0)
	t.Logf("3 ranks, each killed at its 2 s stop timeout, stopped in %v", took)
	if took > 5*time.Second {
		t.Errorf("the group took %v to stop: its ranks stopped one after another", took)
	}
	w, _ := listed(t, ctx, m, "gangpar", units.UnitName("gangpar", 1))
	for _, r := range append([]units.Worker{w}, w.Ranks...) {
		if r.Result != "timeout" {
			t.Errorf("%s: Result %s, want timeout (its own stop timeout)", r.Unit, r.Result)
		}
	}
}

// A rank without its rank 0 (made here by hand: systemd keeps a group's
// rank 0 loaded while a rank is) is listed under a made-up rank 0 that
// keeps the slot taken, and StopWorker of that rank 0 stops it.
func TestGangGroupMissingRankZero(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 30*time.Second)
	m := newManager(t, sb)

	rank1 := units.RankUnitName("stray", 1, 1)
	t.Cleanup(func() { removeUnit(t, sb, rank1) })
	if _, err := sb.Exec(ctx, "systemd-run", "--unit="+rank1, "--property=Type=exec", "/bin/sleep", "1000"); err != nil {
		t.Fatal(err)
	}
	w, ok := listed(t, ctx, m, "stray", units.UnitName("stray", 1))
	if !ok || !w.Missing || w.ActiveState != "deactivating" || len(w.Ranks) != 1 || w.Ranks[0].Unit != rank1 || w.Ranks[0].Rank != 1 {
		t.Fatalf("listed %v, %+v; want a Missing rank 0, deactivating, with %s", ok, w, rank1)
	}
	ch, err := m.StopWorker(ctx, w.Unit)
	if err != nil {
		t.Fatalf("StopWorker(%s): %v", w.Unit, err)
	}
	select {
	case r := <-ch:
		if r != "done" {
			t.Errorf("stop result %q", r)
		}
	case <-ctx.Done():
		t.Fatal("no stop result")
	}
	if _, ok := listed(t, ctx, m, "stray", w.Unit); ok {
		t.Errorf("%s still listed after the stop", rank1)
	}
	// Nothing left: StopWorker fails as for any unit that is not there.
	if _, err := m.StopWorker(ctx, w.Unit); err == nil {
		t.Error("StopWorker of a slot with no unit at all succeeded")
	}
}
