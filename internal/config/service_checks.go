package config

import (
	"fmt"
	"path/filepath"
)

// The checks of service pools that need more than one pool's table: fixed
// port ranges that overlap, and gang groups against [capacity]. The one
// that needs the machine, cpuset_split on a host without the cpuset
// controller, is internal/hostcheck's CheckCPUSet.

// services runs the checks across pools, after every pool is read. Each
// problem names the file of the pool it is reported on.
func (l *serviceLoader) services(c *Config) {
	defer func(file string) { l.file = file }(l.file)
	l.portOverlaps(c)
	l.outputClashes(c)
	l.wakePorts(c)
	if mtw := c.Capacity.MaxTotalWorkers; mtw > 0 {
		for _, p := range sortedPools(c) {
			s := p.Service
			if s == nil || s.GroupSize < 2 {
				continue
			}
			l.file = c.FileOf(p.Name)
			switch {
			case s.GroupSize > mtw:
				l.add(poolKey(p, "service", "group_size"), "a group of %d ranks is %d workers, and [capacity] max_total_workers = %d: not one group would fit",
					s.GroupSize, s.GroupSize, mtw)
			case p.MinWorkers*s.GroupSize > mtw:
				l.add(poolKey(p, "service", "group_size"), "min_workers = %d groups of %d ranks are %d workers, above [capacity] max_total_workers = %d",
					p.MinWorkers, s.GroupSize, p.MinWorkers*s.GroupSize, mtw)
			}
		}
	}
}

type fixedRange struct {
	pool        *Pool
	port        string
	first, last int
}

// portOverlaps refuses two fixed ports whose ranges overlap, in one pool or
// in two: two replicas would be given the same port, and one would fail to
// bind at every start. The problem is reported on the later of the two, and
// names the other with its file when that differs.
func (l *serviceLoader) portOverlaps(c *Config) {
	var ranges []fixedRange
	for _, p := range sortedPools(c) {
		if p.Service == nil {
			continue
		}
		for _, port := range p.Service.Ports {
			if port.Base == 0 {
				continue
			}
			first, last := port.FixedRange(p.MaxWorkers, p.Service.GroupSize)
			r := fixedRange{p, port.Name, first, last}
			for _, o := range ranges {
				if r.first > o.last || o.first > r.last {
					continue
				}
				other := poolKey(o.pool, "service", "ports", o.port)
				if f := c.FileOf(o.pool.Name); f != c.FileOf(p.Name) {
					other += " (in " + f + ")"
				}
				l.file = c.FileOf(p.Name)
				l.add(poolKey(p, "service", "ports", port.Name), "the fixed range %d-%d overlaps %s's %d-%d (a fixed port's range is base to base + max_workers × group_size - 1)",
					r.first, r.last, other, o.first, o.last)
			}
			ranges = append(ranges, r)
		}
	}
}

// output is one file a service pool writes: a template's destination, or
// one of its discovery files (template < 0).
type output struct {
	pool     *Pool
	template int
	path     string
}

// key is the key that decides the output's path.
func (o output) key() string {
	if o.template < 0 {
		return poolKey(o.pool, "service", "discovery_dir")
	}
	return fmt.Sprintf("%s[%d].destination", poolKey(o.pool, "service", "template"), o.template)
}

// outputClashes refuses two outputs with one path: each write would undo
// the other, and a template over a pool's discovery file would be read
// back, by a restarted daemon, as that pool's ready replicas. Every output
// is compared with every other, whatever order the pools are read in
// (issue 27, item 6: a pool's template was compared only with the pools
// before it). The problem is reported on the template, the output its
// owner can move; of two templates, on the later. Discovery files never
// clash with each other: pool names hold no dot. Within a pool, templates()
// has refused two templates with one destination already.
func (l *serviceLoader) outputClashes(c *Config) {
	byPath := map[string][]output{}
	var outputs []output
	for _, p := range sortedPools(c) {
		s := p.Service
		if s == nil {
			continue
		}
		// The file_sd path is reserved even without a metrics_port, which
		// a reload may add.
		for _, f := range []string{p.Name + ".json", p.Name + ".file_sd.json"} {
			outputs = append(outputs, output{p, -1, filepath.Join(s.DiscoveryDir, f)})
		}
		for i, t := range s.Templates {
			outputs = append(outputs, output{p, i, t.Spec.Destination})
		}
	}
	for _, o := range outputs {
		byPath[o.path] = append(byPath[o.path], o)
	}
	for _, o := range outputs {
		if o.template < 0 {
			continue
		}
		l.file = c.FileOf(o.pool.Name)
		// Of two templates, the earlier is not reported: one problem a pair.
		for _, other := range byPath[o.path] {
			if other == o {
				break
			}
			if other.template >= 0 && other.pool != o.pool {
				l.add(o.key(), "%s is also written for pool %s (%s, in %s): each would overwrite the other",
					o.path, other.pool.Name, other.key(), c.FileOf(other.pool.Name))
			}
		}
		for _, other := range byPath[o.path] {
			switch {
			case other.template >= 0:
			case other.pool == o.pool:
				l.add(o.key(), "%s is this pool's own discovery file", o.path)
			default:
				l.add(o.key(), "%s is also written for pool %s (its discovery file, %s, in %s): each would overwrite the other, "+
					"and a restarted daemon would read this template's output as pool %s's ready replicas",
					o.path, other.pool.Name, other.key(), c.FileOf(other.pool.Name), other.pool.Name)
			}
		}
	}
}
