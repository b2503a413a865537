package hostcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// cgroupRoot is where the host's cgroup2 hierarchy is mounted; tests
// replace it.
var cgroupRoot = "/sys/fs/cgroup"

// CheckCPUSet warns about pools with cpuset_split on a host whose cgroup2
// has no cpuset controller: systemd then ignores AllowedCPUs=, and the
// ranks share the pool's CPUs. A warning, not a refusal: the file is right,
// the host lacks a feature, and the replicas still run.
func CheckCPUSet(c *config.Config) []config.Problem {
	var pools []*config.Pool
	for _, p := range c.SortedPools() {
		if p.Service != nil && p.Service.CPUSetSplit {
			pools = append(pools, p)
		}
	}
	if len(pools) == 0 {
		return nil
	}
	// A hybrid host mounts its cgroup2 hierarchy at unified/.
	path := filepath.Join(cgroupRoot, "cgroup.controllers")
	data, err := os.ReadFile(path)
	if err != nil {
		if d, uerr := os.ReadFile(filepath.Join(cgroupRoot, "unified", "cgroup.controllers")); uerr == nil {
			path, data, err = filepath.Join(cgroupRoot, "unified", "cgroup.controllers"), d, nil
		}
	}
	why := ""
	switch {
	case err != nil:
		why = fmt.Sprintf("cannot read %s (%v), so this host has no cgroup2 cpuset controller that we know of", path, err)
	case !slices.Contains(strings.Fields(string(data)), "cpuset"):
		why = fmt.Sprintf("this host's cgroup2 has no cpuset controller (%s lists: %s)", path, strings.Join(strings.Fields(string(data)), " "))
	default:
		return nil
	}
	var warnings []config.Problem
	for _, p := range pools {
		warnings = append(warnings, config.Problem{File: c.FileOf(p.Name), Key: config.PoolKey(p, "service", "cpuset_split"),
			Msg: why + ": the ranks will share the pool's CPUs rather than split them"})
	}
	return warnings
}
