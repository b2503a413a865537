package units

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// cgroupReader reads a unit's cumulative CPU time straight from cgroupfs:
// systemd's CPUUsageNSec property costs a D-Bus round trip per worker per
// tick, while the file is one read, and it is the same kernel counter.
type cgroupReader struct {
	v2 string // cgroup2 mount (or the configured root); "" if none
	v1 string // cgroup v1 hierarchy holding cpuacct; "" if none
}

func newCgroupReader(root string) (cgroupReader, error) {
	if root != "" {
		return cgroupReader{v2: root}, nil
	}
	mounts, err := procfs.GetMounts()
	if err != nil {
		return cgroupReader{}, fmt.Errorf("finding cgroupfs: %w", err)
	}
	// No cgroupfs at all is not fatal here: only CPUUsage needs it, and it
	// says so when called.
	return pickCgroupMounts(mounts), nil
}

// Cgroup2Root is where this process sees the cgroup2 hierarchy ("" when
// none is mounted): the root a unit's ControlGroup is a path under.
func Cgroup2Root() string {
	mounts, err := procfs.GetMounts()
	if err != nil {
		return ""
	}
	return pickCgroupMounts(mounts).v2
}

// pickCgroupMounts picks the cgroup2 mount and the v1 cpuacct mount from the
// mount table. A container may show several cgroup2 mounts; the
// conventional places win over whatever comes first.
func pickCgroupMounts(mounts []*procfs.MountInfo) cgroupReader {
	var r cgroupReader
	for _, m := range mounts {
		mnt := unescapeMount(m.MountPoint)
		switch {
		case m.FSType == "cgroup2":
			if r.v2 == "" || mnt == "/sys/fs/cgroup" || (mnt == "/sys/fs/cgroup/unified" && r.v2 != "/sys/fs/cgroup") {
				r.v2 = mnt
			}
		case m.FSType == "cgroup" && r.v1 == "":
			// A v1 hierarchy names its controllers among its superblock options.
			if _, ok := m.SuperOptions["cpuacct"]; ok {
				r.v1 = mnt
			}
		}
	}
	return r
}

// unescapeMount undoes the kernel's octal escapes (\040 for a space, ...)
// in mount points, which procfs passes through as they are.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// CPUUsage returns the unit's cumulative CPU time from its cgroup: cgroup2
// cpu.stat usage_usec (present whether or not the cpu controller is enabled,
// so it also works on the unified hierarchy of a hybrid host), else cgroup
// v1 cpuacct.usage. It fails if the cgroup is gone, e.g. the worker exited.
// It is the one unit's that w names: a gang group's other ranks, in
// w.Ranks, each have their own.
func (m *Manager) CPUUsage(w Worker) (time.Duration, error) {
	if w.ControlGroup == "" {
		return 0, fmt.Errorf("cpu usage of %s: no control group (unit not running)", w.Unit)
	}
	var errs []error
	if m.cpu.v2 != "" {
		path := filepath.Join(m.cpu.v2, w.ControlGroup, "cpu.stat")
		d, cached, err := m.running.readCPU(w, path)
		if !cached {
			d, err = readCPUStat(path)
		}
		if err == nil {
			return d, nil
		}
		errs = append(errs, err)
	}
	if m.cpu.v1 != "" {
		d, err := readCPUAcct(filepath.Join(m.cpu.v1, w.ControlGroup, "cpuacct.usage"))
		if err == nil {
			return d, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no cgroup2 or cpuacct hierarchy mounted"))
	}
	return 0, fmt.Errorf("cpu usage of %s: %w", w.Unit, errors.Join(errs...))
}

func readCPUStat(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return parseCPUStat(path, b)
}

// parseCPUStat finds usage_usec in a cgroup2 cpu.stat. It allocates
// nothing: it runs for every worker at every tick.
func parseCPUStat(path string, b []byte) (time.Duration, error) {
	const key = "usage_usec "
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			var n uint64
			v = bytes.TrimSpace(v)
			for _, c := range v {
				if c < '0' || c > '9' || n > (1<<63)/10 {
					return 0, fmt.Errorf("%s: bad usage_usec %q", path, v)
				}
				n = n*10 + uint64(c-'0')
			}
			if len(v) == 0 {
				return 0, fmt.Errorf("%s: bad usage_usec %q", path, v)
			}
			return time.Duration(n) * time.Microsecond, nil
		}
	}
	return 0, fmt.Errorf("%s: no usage_usec", path)
}

func readCPUAcct(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: bad value %q", path, b)
	}
	return time.Duration(n), nil
}
