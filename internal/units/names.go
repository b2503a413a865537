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
