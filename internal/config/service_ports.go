package config

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Reading [pools.NAME.service.ports]: a port is "auto", a base number, or
// a table of the two keys of servicePortKeys, { port = ..., socket = true }.

// portNameRE: a port's name becomes FLEXIQ_PORT_<NAME> and a template's
// .Port "name", so it is kept to what both spell without escaping.
var portNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// FixedRange is the ports a fixed port takes over the pool's life: slot N,
// rank R gets Base + (N-1)*groupSize + R, so maxWorkers groups take
// [Base, Base + maxWorkers*groupSize - 1]. An "auto" port has none (0, 0).
func (p Port) FixedRange(maxWorkers, groupSize int) (first, last int) {
	if p.Base == 0 {
		return 0, 0
	}
	return p.Base, p.Base + maxWorkers*max(groupSize, 1) - 1
}

// ports fills s.Ports, sorted by name, from [pools.NAME.service.ports].
func (l *serviceLoader) ports(p *Pool, s *Service, raw value, k func(...string) string) {
	if !raw.set() {
		return
	}
	m, ok := raw.raw.(map[string]any)
	if !ok {
		l.wrongType(k("ports"), "a table of ports, as in [pools.NAME.service.ports]", raw)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		pk := k("ports", name)
		if !portNameRE.MatchString(name) {
			l.add(pk, "a port's name must match [a-z][a-z0-9_]{0,31}: it becomes %s%s", PortEnvPrefix, upperASCII(name))
			continue
		}
		port := Port{Name: name}
		raw := m[name]
		if t, isTable := raw.(map[string]any); isTable {
			pm, ok := l.table(pk, t, servicePortKeys.Names()...)
			if !ok || !l.portSocket(pk, pm, s, &port) {
				continue
			}
			if !pm["port"].set() {
				l.add(pk+".port", "missing: \"auto\" or a base port number")
				continue
			}
			raw, pk = pm["port"].raw, pk+".port"
		}
		if !l.portBase(pk, raw, p, s, &port) {
			continue
		}
		s.Ports = append(s.Ports, port)
	}
}

// portBase reads a port's number: "auto" (Base 0) or a base whose fixed
// range fits.
func (l *serviceLoader) portBase(pk string, raw any, p *Pool, s *Service, port *Port) bool {
	switch v := raw.(type) {
	case string:
		if v != "auto" {
			l.add(pk, "must be \"auto\" or a base port number (1 to 65535), not %q", v)
			return false
		}
	case int64:
		if v < 1 || v > 65535 {
			l.add(pk, "%d is not a port number (1 to 65535)", v)
			return false
		}
		port.Base = int(v)
		if first, last := port.FixedRange(p.MaxWorkers, s.GroupSize); last > 65535 {
			l.add(pk, "the fixed range %d-%d (max_workers %d × group_size %d) ends past 65535: lower the base or max_workers",
				first, last, p.MaxWorkers, s.GroupSize)
			return false
		}
	default:
		l.wrongType(pk, "\"auto\", an integer (a base port) or a table, as { port = 8001, socket = true }", value{raw})
		return false
	}
	return true
}

// portSocket reads a port table's socket key: systemd binds the port and
// passes it to the replica. One port per pool, one unit per replica: a
// transient socket unit of systemd 252 cannot name its service (Service=
// is refused), so it must be the replica's namesake, and a gang group's
// ranks would need one each.
func (l *serviceLoader) portSocket(pk string, pm map[string]value, s *Service, port *Port) bool {
	if !l.boolean(pk+".socket", pm["socket"], &port.Socket) || !port.Socket {
		return true
	}
	if s.GroupSize > 1 {
		l.add(pk+".socket", "a port that systemd binds is for replicas of one unit: group_size is %d", s.GroupSize)
		return false
	}
	if i := slices.IndexFunc(s.Ports, func(o Port) bool { return o.Socket }); i >= 0 {
		l.add(pk+".socket", "port %q is socket-activated already: one port per pool can be (a replica has one socket unit, named after it)", s.Ports[i].Name)
		return false
	}
	return true
}

func portNames(s *Service) []string {
	names := make([]string, len(s.Ports))
	for i, p := range s.Ports {
		names[i] = p.Name
	}
	return names
}

func describePorts(s *Service) string {
	if len(s.Ports) == 0 {
		return "none"
	}
	return strings.Join(portNames(s), ", ")
}
