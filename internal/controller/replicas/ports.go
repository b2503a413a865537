package replicas

// Ports of a service pool's replicas (issue 19, item 1). A fixed port is
// Base + (slot-1)*GroupSize + rank, so a slot always gets the same one; an
// "auto" port is a free one the kernel picks, taken once at the replica's
// start and kept for its life: it goes into the unit's Environment=, from
// which a restarted daemon reads it back rather than picking again.

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// PortsFor assigns every declared port of rank rank of slot slot. taken
// are the ports this pool's replicas hold (and those picked earlier in the
// same round), which an auto port avoids; the picked ones are added to it.
// Gang groups call it once per rank.
func PortsFor(svc *config.Service, slot, rank int, taken map[int]bool) (map[string]int, error) {
	if svc == nil || len(svc.Ports) == 0 {
		return nil, nil
	}
	group := max(svc.GroupSize, 1)
	out := make(map[string]int, len(svc.Ports))
	for _, p := range svc.Ports {
		if p.Base > 0 {
			out[p.Name] = p.Base + (slot-1)*group + rank
			continue
		}
		port, err := FreePort(svc.Address, taken)
		if err != nil {
			return nil, fmt.Errorf("port %s of slot %d: %w", p.Name, slot, err)
		}
		out[p.Name] = port
	}
	for _, port := range out {
		taken[port] = true
	}
	return out, nil
}

// freePortTries bounds the picks that land on a port a replica holds (one
// that is not listening yet, say).
const freePortTries = 20

// FreePort asks the kernel for a free TCP port on address (127.0.0.1 when
// empty): it listens on port 0 and closes at once. The replica binds it
// later, so another program may take it meanwhile: the replica then fails
// to bind, which is a failed start with backoff, and the next start picks
// again. A port with socket = true closes that window at the unit's
// creation: systemd binds it in the same call that starts the replica.
func FreePort(address string, taken map[int]bool) (int, error) {
	if address == "" {
		address = config.DefaultServiceAddress
	}
	var lastErr error
	for range freePortTries {
		l, err := net.Listen("tcp", net.JoinHostPort(address, "0"))
		if err != nil {
			// An address the host does not hold (a proxy's view of it):
			// any interface's free port is as good a guess.
			l, err = net.Listen("tcp", ":0")
		}
		if err != nil {
			lastErr = err
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !taken[port] {
			return port, nil
		}
		lastErr = fmt.Errorf("the kernel offered port %d, which a replica holds", port)
	}
	return 0, fmt.Errorf("cannot pick a free port on %s: %v", address, lastErr)
}

// Env is the environment that carries ports to a replica.
func Env(svc *config.Service, ports map[string]int) map[string]string {
	env := make(map[string]string, len(ports))
	for _, p := range svc.Ports {
		if port, ok := ports[p.Name]; ok {
			env[p.EnvName()] = strconv.Itoa(port)
		}
	}
	return env
}

// PortsFromEnvironment reads an adopted replica's ports back from its
// unit's Environment= (KEY=VALUE): the ones it was started with, never
// picked again. A declared port missing there (the pool's ports changed
// since) is left out; the rollout replaces the replica.
func PortsFromEnvironment(svc *config.Service, env []string) map[string]int {
	if svc == nil || len(svc.Ports) == 0 {
		return nil
	}
	byName := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, config.PortEnvPrefix) {
			byName[k] = v
		}
	}
	out := map[string]int{}
	for _, p := range svc.Ports {
		if n, err := strconv.Atoi(byName[p.EnvName()]); err == nil && n > 0 && n < 65536 {
			out[p.Name] = n
		}
	}
	return out
}

// SocketSpec is the port of ports that systemd binds for the replica
// (socket = true), nil if none: the port keeps its FLEXIQ_PORT_<NAME>, from
// which a restarted daemon reads it back as any other.
func SocketSpec(svc *config.Service, ports map[string]int) *units.SocketSpec {
	for _, p := range svc.Ports {
		if port, ok := ports[p.Name]; ok && p.Socket {
			return &units.SocketSpec{Name: p.Name, Address: svc.Address, Port: port}
		}
	}
	return nil
}

// SocketPorts are those of ports that the replica's socket unit binds
// (socket = true): PID 1 listens there for it.
func SocketPorts(svc *config.Service, ports map[string]int) []int {
	var out []int
	for _, p := range svc.Ports {
		if port, ok := ports[p.Name]; ok && p.Socket {
			out = append(out, port)
		}
	}
	return out
}

// IsAutoPort says whether port is one of ports' "auto" ones.
func IsAutoPort(svc *config.Service, ports map[string]int, port int) bool {
	for _, p := range svc.Ports {
		if p.Base == 0 && ports[p.Name] == port {
			return true
		}
	}
	return false
}

// HasFixedPort says whether svc declares a port with a base.
func HasFixedPort(svc *config.Service) bool {
	return slices.ContainsFunc(svc.Ports, func(p config.Port) bool { return p.Base > 0 })
}

// EnvList is env as KEY=VALUE entries, as a unit's Environment= reads.
func EnvList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// List is ports' numbers, sorted.
func List(ports map[string]int) []int {
	out := make([]int, 0, len(ports))
	for _, p := range ports {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Address is svc's, or the default.
func Address(svc *config.Service) string {
	if svc.Address == "" {
		return config.DefaultServiceAddress
	}
	return svc.Address
}

// IsProbe says whether svc's readiness is a probe the daemon runs.
func IsProbe(svc *config.Service) bool {
	switch svc.Readiness.Kind {
	case config.ReadyHTTP, config.ReadyTCP, config.ReadyCommand:
		return true
	}
	return false
}
