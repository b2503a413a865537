package workers

// The WorkerSpecs of a service pool's starts, with their ports
// (replicas.PortsFor) in their environment.

import (
	"strconv"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/replicas"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// specsFor are the WorkerSpecs of the starts in slots, with the ports
// assigned to each. A slot whose ports cannot be assigned has none: its
// failed start is reported here and its slot backs off.
func (ws *Workers) specsFor(now time.Time, slots []int, revision, why string) (map[int]units.WorkerSpec, map[int]map[string]int) {
	specs := make(map[int]units.WorkerSpec, len(slots))
	ports := make(map[int]map[string]int, len(slots))
	held := ws.portsHeld()
	ws.Svc.avoidedPorts(held)
	for _, slot := range slots {
		if ws.Cfg.GroupSize() >= 2 {
			// A gang group's ranks get their ports, and their peers', in
			// gang.go; rank 0's are the replica's.
			spec := specFor(ws.Cfg, slot, revision, nil)
			if err := ws.gangSpec(&spec, held); err != nil {
				ws.report.startFailed(slot, units.UnitName(ws.name, slot), why, err, ws.Slots.ArmBackoff(slot, now))
				continue
			}
			ports[slot] = replicas.PortsFromEnvironment(ws.Cfg.Service, replicas.EnvList(spec.Ranks[0].Environment))
			specs[slot] = spec
			continue
		}
		pm, err := replicas.PortsFor(ws.Cfg.Service, slot, 0, held)
		if err != nil {
			ws.report.startFailed(slot, units.UnitName(ws.name, slot), why, err, ws.Slots.ArmBackoff(slot, now))
			continue
		}
		ports[slot] = pm
		specs[slot] = specFor(ws.Cfg, slot, revision, pm)
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
		for k, v := range replicas.Env(c.Service, ports) {
			env[k] = v
		}
		s.Environment = env
	}
	s.Socket = replicas.SocketSpec(c.Service, ports)
	return s
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
