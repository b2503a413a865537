package config

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// decimalRE is a plain decimal number, as in "1.5G" or "50%".
var decimalRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// limits builds the optional [pools.NAME.limits] table.
func (l *loader) limits(p *Pool, r *rawLimits, key func(string) string) {
	lim := &p.Limits
	var quota string
	if l.str(key("cpu_quota"), r.CPUQuota, &quota) {
		if usec, ok := parseCPUQuota(quota); ok {
			lim.CPUQuota, lim.CPUQuotaPerSecUSec = quota, usec
		} else {
			l.add(key("cpu_quota"), `must be a percentage above 0, such as "50%%" or "200%%"`)
		}
	}

	if mem, n, ok := l.size(key("memory_max"), r.MemoryMax, true); ok {
		lim.MemoryMax, lim.MemoryMaxBytes = mem, n
	}

	var tasks int
	if l.integer(key("tasks_max"), r.TasksMax, &tasks) {
		if tasks < 1 {
			l.add(key("tasks_max"), "must be >= 1")
		} else {
			lim.TasksMax = uint64(tasks)
		}
	}
}

// size reads a byte count in systemd's size syntax (parseSize), written as
// a string or, bare, as an integer, as systemd allows. It returns the value
// as written and in bytes.
func (r *reader) size(key string, v value, infinity bool) (string, uint64, bool) {
	var s string
	switch raw := v.raw.(type) {
	case nil:
		return "", 0, false
	case int64:
		s = strconv.FormatInt(raw, 10)
	case string:
		s = raw
	default:
		r.wrongType(key, "a string or an integer", v)
		return "", 0, false
	}
	if n, ok := parseSize(s); ok && (infinity || s != "infinity") {
		return s, n, true
	}
	msg := `must be a byte count above 0, optionally with a K, M, G or T suffix (base 1024)`
	if infinity {
		msg += `, or "infinity"`
	}
	r.add(key, "%s", msg)
	return "", 0, false
}

// parseCPUQuota turns "N%" into systemd's CPUQuotaPerSecUSec: 100% is one
// CPU, 1s of CPU time per second.
func parseCPUQuota(s string) (uint64, bool) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok || !decimalRE.MatchString(num) {
		return 0, false
	}
	pct, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, false
	}
	usec := math.Round(pct * 10000)
	// Beyond a million CPUs the number is a typo, and far below float
	// precision or uint64 trouble.
	if usec < 1 || pct > 1e8 {
		return 0, false
	}
	return uint64(usec), true
}

// parseSize reads systemd's size syntax for MemoryMax=, base 1024.
func parseSize(s string) (uint64, bool) {
	if s == "infinity" {
		return math.MaxUint64, true
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return n, n > 0
	}
	if s == "" {
		return 0, false
	}
	unit := strings.IndexByte("KMGT", s[len(s)-1])
	num := s[:len(s)-1]
	if unit < 0 || !decimalRE.MatchString(num) {
		return 0, false
	}
	f, err := strconv.ParseFloat(num, 64)
	n := math.Round(f * math.Pow(1024, float64(unit+1)))
	if err != nil || n < 1 || n >= math.MaxUint64 {
		return 0, false
	}
	return uint64(n), true
}
