package units

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MemoryUsage reads a worker's memory use and limit from its cgroup2
// directory (memory.current, memory.max). On a hybrid host whose memory
// controller is in a v1 hierarchy, the cgroup2 directory has neither: the
// error says so, and the metrics leave the worker's memory out rather than
// report 0. limitSet is false for "max" (no limit).
func (m *Manager) MemoryUsage(w Worker) (usage, limit uint64, limitSet bool, err error) {
	if w.ControlGroup == "" || m.cpu.v2 == "" {
		return 0, 0, false, errors.New("memory of " + w.Unit + ": no cgroup2 directory")
	}
	dir := filepath.Join(m.cpu.v2, w.ControlGroup)
	usage, err = readUint(filepath.Join(dir, "memory.current"))
	if err != nil {
		return 0, 0, false, fmt.Errorf("memory of %s: %w", w.Unit, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "memory.max"))
	if err != nil {
		return usage, 0, false, nil
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return usage, 0, false, nil
	}
	limit, err = strconv.ParseUint(s, 10, 64)
	return usage, limit, err == nil, nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}
