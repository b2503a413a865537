package units_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// A running worker is read once and then taken from the cache for as long
// as it runs under the same invocation; a restart, a crash or a stop between
// two listings shows at the next one, with systemd's facts.
func TestListWorkersCache(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 60*time.Second)
	m := newManager(t, sb)
	unit := start(t, ctx, m, sb, sleeper("cache", 1))

	first, ok := listed(t, ctx, m, "cache", unit)
	if !ok {
		t.Fatalf("%s not listed", unit)
	}
	reads := m.PropertyReads()
	again, _ := listed(t, ctx, m, "cache", unit)
	if n := m.PropertyReads() - reads; n != 0 {
		t.Errorf("listing a running worker again read its properties %d times, want 0", n)
	}
	if !reflect.DeepEqual(again, first) {
		t.Errorf("cached listing %+v, first %+v", again, first)
	}

	// CPU through the cpu.stat kept open for the invocation: it counts on.
	u1, err := m.CPUUsage(first)
	if err != nil {
		t.Fatal(err)
	}
	sb.Sh(t, "cat /proc/self/status >/dev/null") // time passes
	if u2, err := m.CPUUsage(first); err != nil || u2 < u1 {
		t.Errorf("CPUUsage again: %v, %v; want at least %v", u2, err, u1)
	}

	// A restart from outside: a new invocation, read afresh.
	sb.Sh(t, "systemctl restart "+unit)
	reads = m.PropertyReads()
	w, _ := listed(t, ctx, m, "cache", unit)
	if n := m.PropertyReads() - reads; n != 1 {
		t.Errorf("listing after a restart read properties %d times, want 1", n)
	}
	sys := show(t, ctx, sb, unit, "InvocationID", "MainPID")
	if w.InvocationID == first.InvocationID || w.InvocationID != sys["InvocationID"] || utoa(w.MainPID) != sys["MainPID"] {
		t.Errorf("after a restart: invocation %s, MainPID %d; before %s; systemctl says %v", w.InvocationID, w.MainPID, first.InvocationID, sys)
	}
	if !w.ActiveEnter.After(first.ActiveEnter) {
		t.Errorf("after a restart: ActiveEnter %v, not after %v", w.ActiveEnter, first.ActiveEnter)
	}
	if _, err := m.CPUUsage(w); err != nil {
		t.Errorf("CPUUsage after a restart: %v", err)
	}

	// A crash (SIGKILL to the main process): failed, with how it ended.
	sb.Sh(t, "kill -KILL "+strconv.FormatUint(uint64(w.MainPID), 10))
	waitFor(t, ctx, unit+" to fail", func() bool {
		w, _ = listed(t, ctx, m, "cache", unit)
		return w.ActiveState == "failed"
	})
	if w.Result != "signal" || w.ExecMainCode != 2 || w.ExecMainStatus != 9 || w.MainPID != 0 {
		t.Errorf("crashed worker: result %q, ExecMainCode %d, ExecMainStatus %d, MainPID %d; want signal, 2, 9, 0",
			w.Result, w.ExecMainCode, w.ExecMainStatus, w.MainPID)
	}
	if _, err := m.CPUUsage(w); err == nil {
		t.Error("CPUUsage of a failed worker (no cgroup) succeeded")
	}
	if err := m.ResetFailed(ctx, unit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, unit+" to be unloaded", func() bool {
		_, ok := listed(t, ctx, m, "cache", unit)
		return !ok
	})
}

// A restart whose stop leaves a process behind (KillMode=process, which a
// drop-in could set) keeps the cgroup, and systemd 252 even keeps the old
// invocation ID on it: the end of the main process still shows, and the
// listing reads the worker again.
func TestListWorkersCacheReusedCgroup(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 60*time.Second)
	m := newManager(t, sb)
	const unit = "flexiq-reuse@1.service"
	sb.Sh(t, "systemd-run --quiet --unit="+unit+" --slice=flexiq-reuse.slice -p KillMode=process -p Type=exec /bin/sh -c 'sleep 1234 & exec sleep 1234'")
	t.Cleanup(func() {
		removeUnit(t, sb, unit)
		// The process left behind, and nobody else's (sleep 1234 is this
		// test's only).
		sb.Exec(context.Background(), "sh", "-c", "pkill -x -f 'sleep 1234' || true")
	})
	first, ok := listed(t, ctx, m, "reuse", unit)
	if !ok {
		t.Fatalf("%s not listed", unit)
	}
	listed(t, ctx, m, "reuse", unit) // verified and trusted from here

	ino := func() string { return strings.TrimSpace(sb.Sh(t, "stat -c %i /sys/fs/cgroup"+first.ControlGroup)) }
	before := ino()
	sb.Sh(t, "systemctl restart "+unit)
	if after := ino(); after != before {
		t.Fatalf("the cgroup was recreated (inode %s, then %s): this test needs it kept", before, after)
	}
	w, _ := listed(t, ctx, m, "reuse", unit)
	sys := show(t, ctx, sb, unit, "InvocationID", "MainPID")
	if w.InvocationID == first.InvocationID || w.InvocationID != sys["InvocationID"] || utoa(w.MainPID) != sys["MainPID"] {
		t.Errorf("after a restart in the same cgroup: invocation %s, MainPID %d (before %s); systemctl says %v",
			w.InvocationID, w.MainPID, first.InvocationID, sys)
	}
}

// BenchmarkListWorkers lists 500 running workers, as every tick of a pool
// of 500 does: ns/op is the daemon's side (mostly decoding), pid1-ms/op
// PID 1's CPU per listing (the sandbox's init.scope).
//
//	go test -run '^$' -bench ListWorkers ./internal/units/
func BenchmarkListWorkers(b *testing.B) {
	const n = 500
	sb := sandbox.Get(b)
	m := newManager(b, sb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sem := make(chan struct{}, 32)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- m.StartWorker(ctx, sleeper("lbench", i+1))
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = sb.Exec(ctx, "sh", "-c", "systemctl stop 'flexiq-lbench@*.service'; systemctl reset-failed 'flexiq-lbench@*.service'")
	})
	pid1 := func() time.Duration {
		out, err := sb.Exec(ctx, "cat", "/sys/fs/cgroup/init.scope/cpu.stat")
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, _ := strconv.ParseInt(v, 10, 64)
				return time.Duration(us) * time.Microsecond
			}
		}
		b.Fatal("no usage_usec for init.scope")
		return 0
	}
	if _, err := m.ListWorkers(ctx, "lbench"); err != nil { // fills the cache
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	p0 := pid1()
	for range b.N {
		ws, err := m.ListWorkers(ctx, "lbench")
		if err != nil || len(ws) != n {
			b.Fatalf("ListWorkers: %d workers, %v", len(ws), fmt.Sprint(err))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(pid1()-p0)/float64(b.N)/1e6, "pid1-ms/op")
}
