package units

import (
	"regexp"
	"strconv"
	"strings"
)

// Unit names are the daemon's only record of which workers exist: it keeps no
// state of its own, and re-reads everything from systemd by listing units
// whose names parse here. The format must therefore never change.
const (
	unitPrefix = "flexiq-"
	unitSuffix = ".service"
)

// poolRE is the pool name rule of internal/config. It leaves out "-", which
// systemd reads as slice nesting in slice names, and "@", which separates
// the instance in a template name, so a pool name always round-trips.
var poolRE = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// UnitName is the name of the transient service running worker slot of pool:
// an instance of the template flexiq-<pool>@.service, so drop-ins written for
// that template (e.g. /etc/systemd/system/flexiq-email@.service.d/) apply to
// every worker of the pool.
func UnitName(pool string, slot int) string {
	return unitPrefix + pool + "@" + strconv.Itoa(slot) + unitSuffix
}

// SliceName is the slice holding a pool's workers. systemd derives nesting
// from the dashes, so it lives under flexiq.slice and an administrator can cap
// all workers (flexiq.slice) or one pool (flexiq-<pool>.slice) with a drop-in.
func SliceName(pool string) string {
	return unitPrefix + pool + ".slice"
}

// WakeServiceCgroup is the cgroup systemd gives pool's wake process (its
// service in the pool's slice, under flexiq.slice; pool names hold no
// dash, so the slice nests no deeper), as /proc/PID/cgroup shows it in
// systemd's cgroup namespace. Only root can place a process there: the
// control API knows the wake process by it.
func WakeServiceCgroup(pool string) string {
	return "/flexiq.slice/" + SliceName(pool) + "/" + WakeServiceName(pool)
}

// ParseUnitName is the inverse of UnitName. It accepts only names that
// UnitName produces for a valid pool and a non-negative slot, so that a unit
// named by hand (say flexiq-email@01.service) is never mistaken for a worker.
func ParseUnitName(name string) (pool string, slot int, ok bool) {
	rest, found := strings.CutPrefix(name, unitPrefix)
	if !found {
		return "", 0, false
	}
	rest, found = strings.CutSuffix(rest, unitSuffix)
	if !found {
		return "", 0, false
	}
	pool, num, found := strings.Cut(rest, "@")
	if !found || !poolRE.MatchString(pool) {
		return "", 0, false
	}
	slot, err := strconv.Atoi(num)
	if err != nil || slot < 0 || strconv.Itoa(slot) != num {
		return "", 0, false
	}
	return pool, slot, true
}

// rankMarker separates a gang group's slot from the rank in a rank unit's
// instance: flexiq-POOL@SLOT-rRANK.service (RankUnitName).
const rankMarker = "-r"

// ParseRankUnitName parses any unit of a worker: UnitName's (rank 0) and
// RankUnitName's (rank >= 1). Like ParseUnitName it accepts only the
// names those functions produce: flexiq-email@1-r0.service and
// flexiq-email@1-r01.service are no one's.
func ParseRankUnitName(name string) (pool string, slot, rank int, ok bool) {
	if pool, slot, ok := ParseUnitName(name); ok {
		return pool, slot, 0, true
	}
	base, found := strings.CutSuffix(name, unitSuffix)
	if !found {
		return "", 0, 0, false
	}
	i := strings.LastIndex(base, rankMarker)
	if i < 0 {
		return "", 0, 0, false
	}
	num := base[i+len(rankMarker):]
	rank, err := strconv.Atoi(num)
	if err != nil || rank < 1 || strconv.Itoa(rank) != num {
		return "", 0, 0, false
	}
	pool, slot, ok = ParseUnitName(base[:i] + unitSuffix)
	if !ok {
		return "", 0, 0, false
	}
	return pool, slot, rank, true
}
