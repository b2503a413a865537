package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

func TestMain(m *testing.M) {
	if os.Getenv(netCrashEnv) != "" {
		os.Exit(netCrashHelper())
	}
	os.Exit(sandbox.Main(m, sandbox.Options{Name: "sbtest"}))
}

// A transient service started over D-Bus from Go, as the daemon will start
// its workers: its job result arrives, its cgroup counts CPU, and its output
// reaches the journal.
func TestTransientServiceOverDBus(t *testing.T) {
	sb := sandbox.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := sb.Bus(ctx)
	if err != nil {
		t.Fatalf("connecting to the sandbox's bus: %v", err)
	}
	defer conn.Close()

	const unit = "flexiq-sbtest@1.service"
	marker := fmt.Sprintf("sandbox-marker-%d", time.Now().UnixNano())
	// Burn a little CPU, then idle so that the cgroup is still there to read.
	script := fmt.Sprintf("echo %s; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exec sleep 60", marker)
	props := []sddbus.Property{
		sddbus.PropExecStart([]string{"/bin/sh", "-c", script}, false),
		sddbus.PropSlice("flexiq-sbtest.slice"),
		{Name: "Type", Value: dbus.MakeVariant("exec")},
		{Name: "CPUAccounting", Value: dbus.MakeVariant(true)},
	}
	result := make(chan string, 1) // buffered: the bus never blocks on us
	if _, err := conn.StartTransientUnitContext(ctx, unit, "fail", props, result); err != nil {
		t.Fatalf("StartTransientUnit: %v", err)
	}
	select {
	case r := <-result:
		if r != "done" {
			t.Fatalf("start job result %q, want done", r)
		}
	case <-ctx.Done():
		t.Fatal("no job result before the deadline")
	}
	defer func() {
		stopped := make(chan string, 1)
		if _, err := conn.StopUnitContext(context.Background(), unit, "replace", stopped); err != nil {
			t.Errorf("StopUnit: %v", err)
			return
		}
		if r := <-stopped; r != "done" {
			t.Errorf("stop job result %q, want done", r)
		}
	}()

	cgProp, err := conn.GetUnitTypePropertyContext(ctx, unit, "Service", "ControlGroup")
	if err != nil {
		t.Fatalf("reading ControlGroup: %v", err)
	}
	cg := cgProp.Value.Value().(string)
	if want := "/flexiq.slice/flexiq-sbtest.slice/" + unit; cg != want {
		t.Errorf("ControlGroup = %q, want %q (nested slices)", cg, want)
	}
	// The host reads the sandbox's cgroup through its root, as the daemon
	// would read its own host's.
	statPath := fmt.Sprintf("/proc/%d/root/sys/fs/cgroup%s/cpu.stat", sb.PID, cg)
	usage := waitFor(t, ctx, "usage_usec > 0 in "+statPath, func() (int64, bool) {
		b, err := os.ReadFile(statPath)
		if err != nil {
			return 0, false
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n, n > 0
			}
		}
		return 0, false
	})
	t.Logf("%s used %d µs of CPU", unit, usage)

	waitFor(t, ctx, "the marker in the unit's journal", func() (bool, bool) {
		entries, err := sb.Journal(ctx, "-u", unit)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Field("MESSAGE") == marker {
				return true, true
			}
		}
		return false, false
	})
}

// A second sandbox, booted and stopped inside this test, beside the one of
// TestMain: both run at once, and the host is left as it was.
func TestSecondSandboxLeavesHostUntouched(t *testing.T) {
	main := sandbox.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A file old enough for tmpfiles' boot-time cleanup of /tmp to delete:
	// the sandbox must not be able to reach it.
	canary := filepath.Join(os.TempDir(), fmt.Sprintf("flexiq-sandbox-canary-%d", os.Getpid()))
	if err := os.WriteFile(canary, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(canary)
	old := time.Now().Add(-60 * 24 * time.Hour)
	if err := os.Chtimes(canary, old, old); err != nil {
		t.Fatal(err)
	}
	tmpBefore := settledEntries(t, os.TempDir())
	etcBefore := snapshotTree(t, "/etc")
	mountsBefore := readFile(t, "/proc/self/mounts")
	cgMount := cgroup2Mount(t)
	cgBefore := cgroupTree(t, cgMount)

	name := fmt.Sprintf("sbiso-%d", os.Getpid())
	sb, err := sandbox.Start(ctx, sandbox.Options{Name: name, OwnerPID: os.Getpid()})
	if err != nil {
		t.Fatalf("starting a second sandbox: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = sb.Stop(context.Background())
		}
	}()
	if sb.PID == main.PID {
		t.Fatalf("both sandboxes report pid %d", sb.PID)
	}
	if host, _ := sb.Exec(ctx, "hostname"); strings.TrimSpace(host) != name {
		t.Errorf("hostname inside = %q, want %q", strings.TrimSpace(host), name)
	}
	// Write where a careless sandbox would hurt the host.
	if out, err := sb.Exec(ctx, "sh", "-c", "echo x > /etc/flexiq-sandbox-written && echo x > /tmp/flexiq-sandbox-written && systemd-tmpfiles --clean --boot --remove >/dev/null 2>&1; ls /tmp"); err != nil {
		t.Fatalf("writing inside: %v\n%s", err, out)
	}
	pidNS, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", sb.PID))
	if err != nil {
		t.Fatal(err)
	}

	if err := sb.Stop(ctx); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	stopped = true

	if _, err := os.Stat(canary); err != nil {
		t.Errorf("the host's /tmp lost %s: %v", canary, err)
	}
	// Other processes (compilers, other tests) come and go in /tmp; what was
	// there and settled before the sandbox booted must still be there.
	for _, f := range tmpBefore {
		if _, err := os.Lstat(filepath.Join(os.TempDir(), f)); os.IsNotExist(err) {
			t.Errorf("host /tmp/%s vanished while the sandbox ran", f)
		}
	}
	for _, p := range []string{"/etc/flexiq-sandbox-written", "/tmp/flexiq-sandbox-written"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s, written inside the sandbox, appeared on the host", p)
		}
	}
	if etcAfter := snapshotTree(t, "/etc"); etcAfter != etcBefore {
		t.Errorf("the host's /etc changed")
	}
	if got := readFile(t, "/proc/self/mounts"); got != mountsBefore {
		t.Errorf("the host's mounts changed:\nbefore:\n%s\nafter:\n%s", mountsBefore, got)
	}
	cgAfter := cgroupTree(t, cgMount)
	if !equalIgnoringOtherSandboxes(cgBefore, cgAfter, name) {
		t.Errorf("the host's cgroup tree changed:\nbefore: %v\nafter:  %v", cgBefore, cgAfter)
	}
	if left := processesInNamespace(t, pidNS); len(left) > 0 {
		t.Errorf("processes left in the sandbox's PID namespace: %v", left)
	}
	if _, err := os.Stat(filepath.Join(sandbox.StateRoot, name)); err == nil {
		t.Errorf("state directory of %s left behind", name)
	}
}

// The command-line tool: start, status, exec and stop, and a sandbox whose
// owner dies is stopped by its keeper.
func TestCommandLineTool(t *testing.T) {
	sandbox.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "flexiq-sandbox")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/flexiq-sandbox").CombinedOutput(); err != nil {
		t.Fatalf("building the tool: %v\n%s", err, out)
	}
	// The owner is a process we start and kill, standing in for a test
	// binary that dies without a chance to clean up.
	owner := exec.Command("sleep", "600")
	// If this test binary is killed, the stand-in owner dies with it, and so
	// the sandbox it owns.
	owner.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	defer owner.Process.Kill()
	name := fmt.Sprintf("sbcli-%d", os.Getpid())
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("flexiq-sandbox %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := run("start", name, "--owner-pid", strconv.Itoa(owner.Process.Pid))
	for _, want := range []string{"pid=", "bus=unix:path=/proc/", "state="} {
		if !strings.Contains(out, want) {
			t.Errorf("start printed no %q:\n%s", want, out)
		}
	}
	if out := run("status", name); !strings.Contains(out, "state=running") && !strings.Contains(out, "state=degraded") {
		t.Errorf("status:\n%s", out)
	}
	if out := run("exec", name, "--", "cat", "/etc/hostname"); strings.TrimSpace(out) != name {
		t.Errorf("exec cat /etc/hostname = %q", out)
	}
	if err := exec.CommandContext(ctx, bin, "exec", name, "--", "false").Run(); err == nil {
		t.Errorf("exec of a failing command reported success")
	}
	sb, err := sandbox.Attach(name)
	if err != nil {
		t.Fatal(err)
	}

	owner.Process.Kill()
	owner.Wait()
	waitFor(t, ctx, "the keeper to stop the orphaned sandbox", func() (bool, bool) {
		_, err := os.Stat(filepath.Join(sandbox.StateRoot, name))
		return true, os.IsNotExist(err)
	})
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", sb.PID)); err == nil {
		t.Errorf("sandbox systemd %d still running after its owner died", sb.PID)
	}
	if _, err := os.Stat(sb.Cgroup); err == nil {
		t.Errorf("cgroup %s left behind", sb.Cgroup)
	}
	// Stopping what is already gone is not an error.
	run("stop", name)
}

func waitFor[T any](t *testing.T, ctx context.Context, what string, f func() (T, bool)) T {
	t.Helper()
	for {
		v, ok := f()
		if ok {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// settledEntries lists the entries of dir not modified in the last minute.
func settledEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Minute {
			names = append(names, e.Name())
		}
	}
	return names
}

// snapshotTree renders a directory tree's names, sizes and times into one
// comparable string.
func snapshotTree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			return nil
		}
		fmt.Fprintf(&b, "%s %v %d %d\n", p, info.Mode(), info.Size(), info.ModTime().UnixNano())
		return nil
	})
	return b.String()
}

func cgroup2Mount(t *testing.T) string {
	t.Helper()
	for _, line := range strings.Split(readFile(t, "/proc/self/mounts"), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[2] == "cgroup2" {
			return f[1]
		}
	}
	t.Fatal("no cgroup2 mount")
	return ""
}

func cgroupTree(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			dirs = append(dirs, rel)
		}
		return nil
	})
	sort.Strings(dirs)
	return dirs
}

// Other test binaries boot sandboxes of their own in parallel; only ours, and
// everything that is not a sandbox, must be as it was.
func equalIgnoringOtherSandboxes(before, after []string, ours string) bool {
	keep := func(dirs []string) string {
		var kept []string
		for _, d := range dirs {
			if strings.Contains(d, "flexiq-sandbox-") && !strings.Contains(d, "flexiq-sandbox-"+ours) {
				continue
			}
			kept = append(kept, d)
		}
		return strings.Join(kept, "\n")
	}
	return keep(before) == keep(after)
}

func processesInNamespace(t *testing.T, ns string) []string {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
