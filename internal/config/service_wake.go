package config

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// The wake address of a service pool (issue 29): [pools.NAME.service.wake].
// systemd holds a listening socket there; the load balancer sends to it
// while the pool has no ready replica, and a connection arriving wakes the
// pool and is held until a replica is ready (internal/wake, docs/wake.md).

// Wake is the [pools.NAME.service.wake] table; Listen "" = none.
type Wake struct {
	// Listen is the address systemd listens at (host:port, listen).
	Listen string
	// Port names the replicas' port that held connections are forwarded
	// to (port): the pool's only port unless written.
	Port string
	// Mode is WakeHold or WakeReject (mode).
	Mode string
	// HoldTimeout bounds the hold of a connection (hold_timeout_sec);
	// DefaultHoldTimeout.
	HoldTimeout time.Duration
}

// Wake modes.
const (
	WakeHold   = "hold"
	WakeReject = "reject"
)

// DefaultHoldTimeout is hold_timeout_sec's default.
const DefaultHoldTimeout = 60 * time.Second

// ListenPort is the wake address's port number, 0 when there is none.
func (w Wake) ListenPort() int {
	ap, err := netip.ParseAddrPort(w.Listen)
	if err != nil {
		return 0
	}
	return int(ap.Port())
}

// WakeAddress is the service's wake address, "" when it has none or s is
// nil (a pool that is not a service pool).
func (s *Service) WakeAddress() string {
	if s == nil {
		return ""
	}
	return s.Wake.Listen
}

// wake reads [pools.NAME.service.wake] into s.Wake.
func (l *serviceLoader) wake(p *Pool, s *Service, raw value, k func(...string) string) {
	if !raw.set() {
		return
	}
	wk := k("wake")
	m, ok := l.table(wk, raw.raw, wakeKeys.Names()...)
	if !ok {
		return
	}
	w := Wake{Mode: WakeHold, HoldTimeout: DefaultHoldTimeout}
	good := true
	switch {
	case !m["listen"].set():
		l.add(wk+".listen", "missing: the address systemd listens at for this pool's cold requests, as \"127.0.0.1:18080\"")
		good = false
	case !l.str(wk+".listen", m["listen"], &w.Listen):
		good = false
	default:
		ap, err := netip.ParseAddrPort(w.Listen)
		switch {
		case err != nil || ap.Addr().Zone() != "":
			l.add(wk+".listen", "%q is not an IP address and port (as \"127.0.0.1:18080\" or \"[::1]:18080\")", w.Listen)
			good = false
		case ap.Port() == 0:
			l.add(wk+".listen", "%q: port 0 is not a port a load balancer can send to", w.Listen)
			good = false
		case ap.Addr().IsMulticast():
			l.add(wk+".listen", "%s is a multicast address", ap.Addr())
			good = false
		default:
			w.Listen = ap.String()
		}
	}
	if l.str(wk+".mode", m["mode"], &w.Mode) && w.Mode != WakeHold && w.Mode != WakeReject {
		l.add(wk+".mode", "%q: want %q (hold the connection until a replica is ready) or %q (answer 503 with Retry-After at once)", w.Mode, WakeHold, WakeReject)
		good = false
	}
	switch {
	case l.str(wk+".port", m["port"], &w.Port):
		if !slices.Contains(portNames(s), w.Port) {
			l.add(wk+".port", "%q is not declared in [%s] (declared: %s)", w.Port, k("ports"), describePorts(s))
			good = false
		}
	case m["port"].set():
		good = false
	case len(s.Ports) == 1:
		w.Port = s.Ports[0].Name
	case len(s.Ports) == 0:
		l.add(wk, "held connections are forwarded to a port of the replicas, and the pool declares none in [%s]", k("ports"))
		good = false
	default:
		l.add(wk+".port", "missing: the pool declares several ports (%s); name the one held connections are forwarded to", describePorts(s))
		good = false
	}
	if l.seconds(wk+".hold_timeout_sec", m["hold_timeout_sec"], &w.HoldTimeout) && w.HoldTimeout <= 0 {
		l.add(wk+".hold_timeout_sec", "must be > 0")
		good = false
	}
	if good {
		s.Wake = w
	}
}

// misplacedWake refuses a wake table outside a service table: only a
// service pool's replicas serve the connections a wake address takes.
func (l *loader) misplacedWake(p *Pool, raw value) {
	if !raw.set() {
		return
	}
	if p.Service == nil {
		l.add(poolKey(p, "wake"), "a wake address is for a service pool, and this pool has no [%s] table: its workers serve no connections", poolKey(p, "service"))
		return
	}
	l.add(poolKey(p, "wake"), "write the wake address as [%s]", poolKey(p, "service", "wake"))
}

// wakePorts refuses a wake address whose port another pool's wake address,
// or a fixed replica range (this pool's or another's), uses: the socket
// unit or the replicas would fail to bind. Ports are compared whatever the
// addresses, as a replica binds the port its pool's address names and may
// bind the wildcard. The problem is reported on the wake address.
func (l *serviceLoader) wakePorts(c *Config) {
	type use struct {
		key, file   string
		first, last int
		wake        bool
	}
	var uses []use
	pools := sortedPools(c)
	for _, p := range pools {
		if p.Service == nil {
			continue
		}
		for _, port := range p.Service.Ports {
			if port.Base > 0 {
				first, last := port.FixedRange(p.MaxWorkers, p.Service.GroupSize)
				uses = append(uses, use{poolKey(p, "service", "ports", port.Name), c.FileOf(p.Name), first, last, false})
			}
		}
	}
	for _, p := range pools {
		if p.Service == nil || p.Service.Wake.ListenPort() == 0 {
			continue
		}
		port := p.Service.Wake.ListenPort()
		key, file := poolKey(p, "service", "wake", "listen"), c.FileOf(p.Name)
		l.file = file
		for _, o := range uses {
			if port < o.first || port > o.last {
				continue
			}
			other := o.key
			if o.file != file {
				other += " (in " + o.file + ")"
			}
			what := fmt.Sprintf("in the fixed range %d-%d of %s", o.first, o.last, other)
			if o.wake {
				what = "the port of " + other
			}
			l.add(key, "port %d is also %s: one of the two would fail to bind", port, what)
		}
		uses = append(uses, use{key, file, port, port, true})
	}
}

// WakeWarnings are the wake addresses of pools that never idle at zero,
// for hostcheck's Warnings.
func WakeWarnings(c *Config) []Problem {
	var out []Problem
	for _, p := range sortedPools(c) {
		if p.Service.WakeAddress() != "" && p.MinWorkers > 0 {
			out = append(out, Problem{File: c.FileOf(p.Name), Key: poolKey(p, "service", "wake"),
				Msg: fmt.Sprintf("min_workers = %d: the pool never idles at zero, so its wake address only takes requests while all its replicas are down", p.MinWorkers)})
		}
	}
	return out
}
