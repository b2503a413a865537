package units

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MemoryUsage returns the unit's current memory use from its cgroup2
// memory.current. That file exists only where the memory controller is
// enabled on the unified hierarchy: on a hybrid host (cgroup v1 controllers,
// cgroup2 for systemd's own tracking) it does not, and the use is unknown:
// an error, which status shows as "-".
func (m *Manager) MemoryUsage(w Worker) (uint64, error) {
	if w.ControlGroup == "" || m.cpu.v2 == "" {
		return 0, fmt.Errorf("memory of %s: no cgroup2 control group", w.Unit)
	}
	b, err := os.ReadFile(filepath.Join(m.cpu.v2, w.ControlGroup, "memory.current"))
	if err != nil {
		return 0, fmt.Errorf("memory of %s: %w", w.Unit, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memory of %s: %w", w.Unit, err)
	}
	return n, nil
}
