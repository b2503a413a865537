package controller

// Ports of a service pool's replicas (issue 19, item 1). A fixed port is
// Base + (slot-1)*GroupSize + rank, so a slot always gets the same one; an
// "auto" port is a free one the kernel picks, taken once at the replica's
// start and kept for its life: it goes into the unit's Environment=, from
// which a restarted daemon reads it back rather than picking again.

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// portsFor assigns every declared port of rank rank of slot slot. taken
// are the ports this pool's replicas hold (and those picked earlier in the
// same round), which an auto port avoids; the picked ones are added to it.
// Gang groups call it once per rank.
func portsFor(svc *config.Service, slot, rank int, taken map[int]bool) (map[string]int, error) {
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
		port, err := freePort(svc.Address, taken)
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

// freePort asks the kernel for a free TCP port on address (127.0.0.1 when
// empty): it listens on port 0 and closes at once. The replica binds it
// later, so another program may take it meanwhile: the replica then fails
// to bind, which is a failed start with backoff, and the next start picks
// again. A port with socket = true closes that window at the unit's
// creation: systemd binds it in the same call that starts the replica.
func freePort(address string, taken map[int]bool) (int, error) {
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

// portEnv is the environment that carries ports to a replica.
func portEnv(svc *config.Service, ports map[string]int) map[string]string {
	env := make(map[string]string, len(ports))
	for _, p := range svc.Ports {
		if port, ok := ports[p.Name]; ok {
			env[p.EnvName()] = strconv.Itoa(port)
		}
	}
	return env
}

// portsFromEnvironment reads an adopted replica's ports back from its
// unit's Environment= (KEY=VALUE): the ones it was started with, never
// picked again. A declared port missing there (the pool's ports changed
// since) is left out; the rollout replaces the replica.
func portsFromEnvironment(svc *config.Service, env []string) map[string]int {
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

// specsFor are the WorkerSpecs of the starts in slots, with the ports
// assigned to each. A slot whose ports cannot be assigned has none: its
// failed start is reported here and its slot backs off.
func (ws *workers) specsFor(now time.Time, slots []int, revision, why string) (map[int]units.WorkerSpec, map[int]map[string]int) {
	specs := make(map[int]units.WorkerSpec, len(slots))
	ports := make(map[int]map[string]int, len(slots))
	held := ws.portsHeld()
	ws.avoidedPorts(held)
	for _, slot := range slots {
		if ws.cfg.GroupSize() >= 2 {
			// A gang group's ranks get their ports, and their peers', in
			// gang.go; rank 0's are the replica's.
			spec := specFor(ws.cfg, slot, revision, nil)
			if err := ws.gangSpec(&spec); err != nil {
				ws.report.startFailed(slot, units.UnitName(ws.name, slot), why, err, ws.slots.ArmBackoff(slot, now))
				continue
			}
			ports[slot] = portsFromEnvironment(ws.cfg.Service, envList(spec.Ranks[0].Environment))
			specs[slot] = spec
			continue
		}
		pm, err := portsFor(ws.cfg.Service, slot, 0, held)
		if err != nil {
			ws.report.startFailed(slot, units.UnitName(ws.name, slot), why, err, ws.slots.ArmBackoff(slot, now))
			continue
		}
		ports[slot] = pm
		specs[slot] = specFor(ws.cfg, slot, revision, pm)
	}
	return specs, ports
}

// specFor is the WorkerSpec of one start: the pool's definition, and for
// a service its ports and readiness. The revision is the pool's, computed
// without the ports, which differ from slot to slot.
func specFor(c *config.Pool, slot int, revision string, ports map[string]int) units.WorkerSpec {
	s := workerSpec(c, slot, revision)
	if c.Service == nil {
		return s
	}
	if len(ports) > 0 {
		env := make(map[string]string, len(c.Environment)+len(ports))
		for k, v := range c.Environment {
			env[k] = v
		}
		for k, v := range portEnv(c.Service, ports) {
			env[k] = v
		}
		s.Environment = env
	}
	s.Socket = socketSpec(c.Service, ports)
	return s
}

// socketSpec is the port of ports that systemd binds for the replica
// (socket = true), nil if none: the port keeps its FLEXIQ_PORT_<NAME>, from
// which a restarted daemon reads it back as any other.
func socketSpec(svc *config.Service, ports map[string]int) *units.SocketSpec {
	for _, p := range svc.Ports {
		if port, ok := ports[p.Name]; ok && p.Socket {
			return &units.SocketSpec{Name: p.Name, Address: svc.Address, Port: port}
		}
	}
	return nil
}

// revisionSpec is the definition a revision names. A service's ports go
// in as declared ("auto", or their base), not as assigned, which differ
// from slot to slot: a change of the declaration rolls the replicas onto
// their new ports. A queue pool's is its WorkerSpec alone, as before.
func revisionSpec(c *config.Pool) units.WorkerSpec {
	s := workerSpec(c, 0, "")
	if c.Service == nil || len(c.Service.Ports) == 0 {
		return withGroupShape(c, s)
	}
	env := make(map[string]string, len(c.Environment)+len(c.Service.Ports))
	for k, v := range c.Environment {
		env[k] = v
	}
	for _, p := range c.Service.Ports {
		env[p.EnvName()] = "auto"
		if p.Base > 0 {
			env[p.EnvName()] = "base " + strconv.Itoa(p.Base)
		}
		if p.Socket {
			// A port that becomes systemd's, or the replica's again,
			// is a new definition: the replicas roll.
			env[p.EnvName()] += " socket"
		}
	}
	s.Environment = env
	return withGroupShape(c, s)
}

// envList is env as KEY=VALUE entries, as a unit's Environment= reads.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}
