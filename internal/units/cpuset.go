package units

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxCPU bounds a CPU number in AllowedCPUs: systemd's own limit
// (CPU_SET_MAX is 8192 in src/shared/cpu-set-util.h), so that a typo does
// not build a megabyte of bitmask.
const maxCPU = 8191

// cpuSetMask turns a cpuset list such as "0-3,8" into the bitmask that
// systemd's AllowedCPUs= D-Bus property takes (signature "ay"): bit i of
// byte j is CPU 8j+i, as cpu_set_from_dbus() in systemd's
// src/shared/cpu-set-util.c reads it. It returns nil for "".
func cpuSetMask(list string) ([]byte, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var mask []byte
	for _, part := range strings.Split(list, ",") {
		lo, hi, err := cpuRange(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", list, err)
		}
		for cpu := lo; cpu <= hi; cpu++ {
			for len(mask) <= cpu/8 {
				mask = append(mask, 0)
			}
			mask[cpu/8] |= 1 << (cpu % 8)
		}
	}
	return mask, nil
}

// cpuRange parses "N" or "N-M".
func cpuRange(s string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = cpuNumber(a); err != nil {
		return 0, 0, err
	}
	hi = lo
	if isRange {
		if hi, err = cpuNumber(b); err != nil {
			return 0, 0, err
		}
		if hi < lo {
			return 0, 0, fmt.Errorf("range %q runs backwards", s)
		}
	}
	return lo, hi, nil
}

func cpuNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxCPU || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("%q is not a CPU number (0-%d)", s, maxCPU)
	}
	return n, nil
}

// CgroupControllers lists the controllers of the cgroup2 hierarchy's root
// (its cgroup.controllers), those systemd can enable for workers: a pool
// that splits its CPUs across ranks (AllowedCPUs) needs "cpuset", without
// which systemd takes AllowedCPUs= and enforces nothing. On a host whose
// cpuset is bound to a cgroup v1 hierarchy (hybrid), it is absent.
func (m *Manager) CgroupControllers() ([]string, error) {
	if m.cpu.v2 == "" {
		return nil, errors.New("cgroup controllers: no cgroup2 hierarchy mounted")
	}
	b, err := os.ReadFile(filepath.Join(m.cpu.v2, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroup controllers: %w", err)
	}
	return strings.Fields(string(b)), nil
}
