package units

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

func TestPickCgroupMounts(t *testing.T) {
	for _, tc := range []struct {
		name, table string
		want        cgroupReader
	}{
		{"unified", `sysfs /sys sysfs rw 0 0
cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0
`, cgroupReader{v2: "/sys/fs/cgroup"}},
		// This is what the development host of this package looks like.
		{"hybrid", `tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
`, cgroupReader{v2: "/sys/fs/cgroup/unified", v1: "/sys/fs/cgroup/cpuacct"}},
		{"legacy, co-mounted cpu,cpuacct", `cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,nodev,noexec,relatime,cpu,cpuacct 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,name=systemd 0 0
`, cgroupReader{v1: "/sys/fs/cgroup/cpu,cpuacct"}},
		{"conventional mount wins", `cgroup2 /run/other\040place cgroup2 rw 0 0
cgroup2 /sys/fs/cgroup cgroup2 rw 0 0
`, cgroupReader{v2: "/sys/fs/cgroup"}},
		{"escaped path", `cgroup2 /run/my\040cgroup cgroup2 rw 0 0
`, cgroupReader{v2: "/run/my cgroup"}},
		{"none", "proc /proc proc rw 0 0\n", cgroupReader{}},
	} {
		if got := pickCgroupMounts(mountTable(tc.table)); got != tc.want {
			t.Errorf("%s: pickCgroupMounts = %+v; want %+v", tc.name, got, tc.want)
		}
	}
}

// mountTable turns a table in /proc/self/mounts form into what procfs
// reads from /proc/self/mountinfo: the fields the picker looks at.
func mountTable(table string) []*procfs.MountInfo {
	var mounts []*procfs.MountInfo
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		f := strings.Fields(line)
		opts := map[string]string{}
		for _, o := range strings.Split(f[3], ",") {
			opts[o] = ""
		}
		mounts = append(mounts, &procfs.MountInfo{MountPoint: f[1], FSType: f[2], SuperOptions: opts})
	}
	return mounts
}

// On a hybrid host without a cgroup2 cpu.stat for the unit, CPUUsage falls
// back to cpuacct.usage (nanoseconds) in the v1 hierarchy.
func TestCPUUsageFallback(t *testing.T) {
	dir := t.TempDir()
	v2, v1 := filepath.Join(dir, "unified"), filepath.Join(dir, "cpuacct")
	const cg = "/flexiq.slice/flexiq-x.slice/flexiq-x@1.service"
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(v1, cg, "cpuacct.usage"), "2500000000\n")
	m := &Manager{cpu: cgroupReader{v2: v2, v1: v1}}
	w := Worker{Unit: "flexiq-x@1.service", ControlGroup: cg}
	if d, err := m.CPUUsage(w); err != nil || d != 2500*time.Millisecond {
		t.Errorf("v1 fallback: %v, %v; want 2.5s", d, err)
	}
	// cgroup2's cpu.stat wins where it exists.
	write(filepath.Join(v2, cg, "cpu.stat"), "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n")
	if d, err := m.CPUUsage(w); err != nil || d != 1234*time.Microsecond {
		t.Errorf("cgroup2: %v, %v; want 1.234ms", d, err)
	}
	// Gone from both: an error naming the unit.
	w.ControlGroup = "/flexiq.slice/flexiq-x.slice/flexiq-x@2.service"
	if _, err := m.CPUUsage(w); err == nil || !strings.Contains(err.Error(), w.Unit) {
		t.Errorf("missing cgroup: %v, want an error naming the unit", err)
	}
	if _, err := (&Manager{}).CPUUsage(Worker{Unit: "u", ControlGroup: cg}); err == nil {
		t.Error("no hierarchy at all: no error")
	}
}
