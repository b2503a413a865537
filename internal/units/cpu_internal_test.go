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

func TestParseCPUStat(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     time.Duration
		err      string
	}{
		{"cgroup2 without the cpu controller", "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n", 1234 * time.Microsecond, ""},
		{"with the cpu controller", "usage_usec 98765432\nuser_usec 1\nsystem_usec 2\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n", 98765432 * time.Microsecond, ""},
		{"not the first line", "user_usec 1\nusage_usec 7\n", 7 * time.Microsecond, ""},
		{"no final newline", "usage_usec 42", 42 * time.Microsecond, ""},
		{"missing", "user_usec 1\nsystem_usec 2\n", 0, "no usage_usec"},
		{"empty file", "", 0, "no usage_usec"},
		{"not a number", "usage_usec 12x\n", 0, "bad usage_usec"},
		{"empty value", "usage_usec \n", 0, "bad usage_usec"},
		{"overflow", "usage_usec 99999999999999999999999\n", 0, "bad usage_usec"},
		{"a longer key is not it", "usage_usec_total 5\nusage_usec 6\n", 6 * time.Microsecond, ""},
	} {
		got, err := parseCPUStat("/x/cpu.stat", []byte(c.in))
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "/x/cpu.stat")):
			t.Errorf("%s: error %v, want one naming the file and %q", c.name, err, c.err)
		}
	}
}
