// Package hostload reads how loaded the host is, for the host guard: CPU
// busy time from /proc/stat as a delta between two reads, pressure stall
// information from /proc/pressure/{cpu,memory} ("some avg10"), and
// MemAvailable from /proc/meminfo, all through prometheus/procfs. It judges
// nothing; policy.Judge does.
package hostload

import (
	"fmt"
	"sync"

	"github.com/prometheus/procfs"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// Reading is one read of the host, with why a part of it is missing.
type Reading struct {
	policy.HostReading
	// CPUErr, PSIErr and MemErr say why a part is not known. The first
	// read has no CPU delta yet, which is no error.
	CPUErr, PSIErr, MemErr error
}

// Reader reads the host. CPU is the busy share of all cores since the
// previous Read, so the first Read knows no CPU. Safe for concurrent use.
type Reader struct {
	fs procfs.FS

	mu   sync.Mutex
	prev procfs.CPUStat
	have bool
}

// New reads from the proc file system at root ("/proc" on a real host; a
// test's fixture otherwise).
func New(root string) (*Reader, error) {
	fs, err := procfs.NewFS(root)
	if err != nil {
		return nil, fmt.Errorf("host load: %w", err)
	}
	return &Reader{fs: fs}, nil
}

// Read samples the host now.
func (r *Reader) Read() Reading {
	var out Reading
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, err := r.fs.Stat(); err != nil {
		out.CPUErr = fmt.Errorf("read /proc/stat: %w", err)
		r.have = false
	} else {
		if r.have {
			out.CPU, out.CPUKnown = busy(r.prev, st.CPUTotal)
		}
		r.prev, r.have = st.CPUTotal, true
	}

	cpu, errC := r.fs.PSIStatsForResource("cpu")
	mem, errM := r.fs.PSIStatsForResource("memory")
	switch {
	case errC != nil:
		out.PSIErr = errC
	case errM != nil:
		out.PSIErr = errM
	case cpu.Some == nil || mem.Some == nil:
		out.PSIErr = fmt.Errorf("/proc/pressure has no \"some\" line")
	default:
		out.PSICPU, out.PSIMemory, out.PSIKnown = cpu.Some.Avg10, mem.Some.Avg10, true
	}

	if mi, err := r.fs.Meminfo(); err != nil {
		out.MemErr = fmt.Errorf("read /proc/meminfo: %w", err)
	} else if mi.MemAvailableBytes != nil {
		out.MemAvailable, out.MemKnown = *mi.MemAvailableBytes, true
	} else {
		out.MemErr = fmt.Errorf("/proc/meminfo has no MemAvailable (a kernel before 3.14)")
	}
	return out
}

// busy is the share of all cores' time between a and b that was not idle.
// Guest time is already counted in user time by the kernel, so it is left
// out of the total. Iowait is idle: a CPU waiting for a disk can run a
// worker. When the total did not advance (no time passed, or a CPU taken
// offline took its counts with it) there is no reading. The kernel
// documents that iowait alone can decrease (it is accounted per CPU and a
// task moves between them), so each field's delta counts from zero rather
// than letting one backwards field void or skew the reading.
func busy(a, b procfs.CPUStat) (float64, bool) {
	total := func(s procfs.CPUStat) float64 {
		return s.User + s.Nice + s.System + s.Idle + s.Iowait + s.IRQ + s.SoftIRQ + s.Steal
	}
	if total(b) <= total(a) {
		return 0, false
	}
	d := func(x, y float64) float64 { return max(0, y-x) }
	idle := d(a.Idle, b.Idle) + d(a.Iowait, b.Iowait)
	work := d(a.User, b.User) + d(a.Nice, b.Nice) + d(a.System, b.System) +
		d(a.IRQ, b.IRQ) + d(a.SoftIRQ, b.SoftIRQ) + d(a.Steal, b.Steal)
	return work / (idle + work), true
}
