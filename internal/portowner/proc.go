package portowner

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// readProcs reads a cgroup's cgroup.procs.
func readProcs(dir string) ([]int, error) {
	b, err := os.ReadFile(dir + "/cgroup.procs")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// procUID is a process's real uid, from /proc/PID/status, which anyone
// may read.
func procUID(pid int) (uint32, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				uid, err := strconv.ParseUint(f[0], 10, 32)
				return uint32(uid), err == nil
			}
		}
	}
	return 0, false
}

// socketInodes are the sockets a process holds, from its /proc/PID/fd
// links "socket:[INODE]". Reading them needs ptrace access to the process
// (the same uid, or CAP_SYS_PTRACE): an error wrapping os.ErrPermission
// says so; os.ErrNotExist says the process is gone.
func socketInodes(pid int) ([]uint64, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, e := range ents {
		target, err := os.Readlink(dir + e.Name())
		if err != nil {
			if os.IsNotExist(err) {
				continue // closed meanwhile
			}
			return nil, err
		}
		if s, ok := strings.CutPrefix(target, "socket:["); ok {
			if ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				out = append(out, ino)
			}
		}
	}
	return out, nil
}
