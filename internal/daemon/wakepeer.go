package daemon

import (
	"path"
	"strings"

	"github.com/prometheus/procfs"

	ctlsock "github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// The wake process (issue 29) relays connections from anyone who can reach
// the wake address, so it runs as a dynamic user (DynamicUser=, no group
// of ours), not as root. The control API knows it by its cgroup, which
// only root can place a process in: it may wake its own pool and read that
// pool's ready replicas, nothing else (control.Authorizer.WakeOf).

// systemd allocates DynamicUser= uids from this range (systemd.exec(5)).
// A peer outside it is judged without reading /proc: a flood of refused
// connections stays as cheap to refuse as before.
const dynamicUIDMin, dynamicUIDMax = 61184, 65519

// wakeOf names the pool whose wake process p is: a dynamic user in the
// cgroup of that pool's wake service. The cgroup is read for the PID that
// connected (SO_PEERCRED); a peer that exited and whose PID a pool's wake
// process took since would pass for it, and could only wake that pool or
// read its replicas' addresses.
func wakeOf(p ctlsock.Peer) (string, bool) {
	if p.UID < dynamicUIDMin || p.UID > dynamicUIDMax || p.PID <= 0 {
		return "", false
	}
	return wakeCgroupPool(cgroupOf(p.PID))
}

// wakeCgroupPool is the pool whose wake service has cgroup cg, if any.
func wakeCgroupPool(cg string) (string, bool) {
	pool, ok := strings.CutSuffix(strings.TrimPrefix(path.Base(cg), "flexiq-"), "-wake.service")
	if !ok || pool == "" || cg != units.WakeServiceCgroup(pool) {
		return "", false
	}
	return pool, true
}

// cgroupOf is pid's cgroup v2 path, "" when it cannot be read.
func cgroupOf(pid int32) string {
	proc, err := procfs.NewProc(int(pid))
	if err != nil {
		return ""
	}
	cgs, err := proc.Cgroups()
	if err != nil {
		return ""
	}
	for _, c := range cgs {
		if c.HierarchyID == 0 {
			return c.Path
		}
	}
	return ""
}
