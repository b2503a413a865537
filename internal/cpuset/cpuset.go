// Package cpuset reads, writes and divides cgroup cpuset lists ("0-3,6,8-9",
// the format of cpuset.cpus and /sys/devices/system/cpu/online), so that a
// gang group's ranks can each be given their own CPUs (AllowedCPUs=), no
// two ranks of a group on one CPU. The arithmetic is pure; Allowed is the
// only I/O, under a root that tests replace.
package cpuset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Set is a set of CPU numbers, sorted, without duplicates.
type Set []int

// maxCPU bounds a parsed CPU number: the kernel's NR_CPUS is at most 8192,
// and a typo such as "0-4000000000" must not allocate gigabytes.
const maxCPU = 1 << 16

// Parse reads a cpuset list: comma-separated CPU numbers and inclusive
// ranges, white space around it ignored; "" is the empty set.
func Parse(s string) (Set, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Set{}, nil
	}
	var out Set
	for _, part := range strings.Split(s, ",") {
		lo, hi, err := parseRange(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("cpuset %q: %w", s, err)
		}
		for c := lo; c <= hi; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func parseRange(part string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(part, "-")
	if lo, err = parseCPU(a); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = parseCPU(b); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("range %q ends before it starts", part)
	}
	return lo, hi, nil
}

func parseCPU(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	if n >= maxCPU {
		return 0, fmt.Errorf("CPU %d is beyond %d", n, maxCPU-1)
	}
	return n, nil
}

// String is the set in the kernel's own format: runs of two or more
// consecutive CPUs as ranges ("0-3,6,8-9"), "" for the empty set.
func (s Set) String() string {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Split divides s into n disjoint sets, one per rank, each a run of
// neighbouring CPUs of s (neighbours in s share caches more often than
// not), their sizes differing by at most one, the larger ones first. It
// fails when s has fewer CPUs than n: two ranks would share one.
func Split(s Set, n int) ([]Set, error) {
	if n < 1 {
		return nil, fmt.Errorf("splitting cpuset %q: %d ranks", s, n)
	}
	if len(s) < n {
		return nil, fmt.Errorf("cpuset %q has %d CPUs, fewer than the %d ranks that must not share one", s, len(s), n)
	}
	size, extra := len(s)/n, len(s)%n
	out := make([]Set, n)
	at := 0
	for i := range out {
		k := size
		if i < extra {
			k++
		}
		out[i] = slices.Clone(s[at : at+k])
		at += k
	}
	return out, nil
}

// The files Allowed reads, relative to its root.
const (
	selfCgroup  = "proc/self/cgroup"
	cgroupMount = "sys/fs/cgroup"
	effective   = "cpuset.cpus.effective"
	onlineCPUs  = "sys/devices/system/cpu/online"
)

// Allowed is the CPUs this process's pools may use, read under root ("/"
// on a host): its own cgroup's cpuset.cpus.effective, else the cgroup
// root's, else the online CPUs. A cgroup file that is absent (no cpuset
// controller there) or empty falls through to the next; the online CPUs
// must be readable.
func Allowed(root string) (Set, error) {
	var tried []string
	for _, p := range candidates(root) {
		b, err := os.ReadFile(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				tried = append(tried, p)
				continue
			}
			return nil, fmt.Errorf("reading the allowed CPUs: %w", err)
		}
		s, err := Parse(string(b))
		if err != nil {
			return nil, fmt.Errorf("reading the allowed CPUs from %s: %w", p, err)
		}
		if len(s) > 0 {
			return s, nil
		}
		tried = append(tried, p+" (empty)")
	}
	return nil, fmt.Errorf("reading the allowed CPUs: none of %s", strings.Join(tried, ", "))
}

// candidates are the files Allowed reads, in order.
func candidates(root string) []string {
	var out []string
	if cg, ok := ownCgroup(filepath.Join(root, selfCgroup)); ok && cg != "/" {
		out = append(out, filepath.Join(root, cgroupMount, cg, effective))
	}
	return append(out, filepath.Join(root, cgroupMount, effective), filepath.Join(root, onlineCPUs))
}

// ownCgroup is the cgroup2 path in a /proc/PID/cgroup file: the line
// "0::/PATH". A host on cgroup v1 has none.
func ownCgroup(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if cg, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(cg, "/") {
			return filepath.Clean(cg), true
		}
	}
	return "", false
}
