package workers

// Gang groups (issue 19): a service pool whose group size N is 2 or more
// runs each worker (each slot) as N units, ranks 0 … N-1, that systemd
// starts in one transaction and binds together (units.WorkerSpec.Ranks).
// The pool counts, scales and backs off groups; rank 0 stands for its
// group everywhere a worker is named (the listing, the slot table,
// readiness, discovery). What this file adds is each rank's environment:
// its rank, the group size, its ports and its peers' ADDRESS:PORT per
// port, and with cpuset_split its own CPUs. Reading a group's end out of a
// listing, and holding its slot while units outlive its rank 0, are the
// slot table's (internal/slots/gang.go).

import (
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/replicas"
	"github.com/flexiq/flexiq-scaled/internal/cpuset"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// PortPicker hands out free TCP ports. Each port it picked stays held
// until Close, so that no two ranks of one group get the same one.
type PortPicker interface {
	Pick() (int, error)
	Close()
}

// freePorts picks ports the kernel says are free, by listening on port 0
// of every address; the listeners are closed once the group's environment
// is written, and the ranks bind the ports when they start. Another
// process may take one meanwhile: the rank then fails to bind, which is a
// failed start with backoff, and the next start picks again.
type freePorts struct{ held []net.Listener }

func newFreePorts() PortPicker { return &freePorts{} }

func (f *freePorts) Pick() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	f.held = append(f.held, l)
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (f *freePorts) Close() {
	for _, l := range f.held {
		l.Close()
	}
	f.held = nil
}

// skipTaken is pick without the ports in taken, as replicas.FreePort is
// for a single unit: the pool's replicas' own (a rank that does not listen
// yet leaves its port free to the kernel), those of groups picked earlier
// in the round, and those the port guard found another's listener on
// (issue 27), which the kernel may offer again once that listener moves
// to another of its addresses. The picker keeps each port it gave until
// Close, so a retry gets another; after maxPickTries the start fails.
func skipTaken(pick func() (int, error), taken map[int]bool) func() (int, error) {
	return func() (int, error) {
		for range maxPickTries {
			p, err := pick()
			if err != nil || !taken[p] {
				return p, err
			}
		}
		return 0, fmt.Errorf("picking a free port: %d picks were all ports held by replicas or found held by another", maxPickTries)
	}
}

const maxPickTries = 20

// portPlan assigns a service pool's named ports to its replicas and their
// ranks.
type portPlan struct {
	ports []config.Port
	size  int // ranks per replica (1 for a single unit)
	pick  func() (int, error)
}

// portsFor is the ports of rank rank of the replica in slot (rank 0 for a
// replica that is one unit), by name: a fixed port is Base + (slot-1)*size
// + rank, so that a pool's fixed range is the one config.Port documents; an
// "auto" port is a free one, picked now.
func (pp portPlan) portsFor(slot, rank int) (map[string]int, error) {
	out := make(map[string]int, len(pp.ports))
	for _, p := range pp.ports {
		if p.Base > 0 {
			out[p.Name] = p.Base + (slot-1)*max(1, pp.size) + rank
			continue
		}
		port, err := pp.pick()
		if err != nil {
			return nil, fmt.Errorf("port %s of slot %d rank %d: %w", p.Name, slot, rank, err)
		}
		out[p.Name] = port
	}
	return out, nil
}

// groupRanks is the ranks of the group in slot: each one's environment
// (FLEXIQ_RANK, FLEXIQ_GROUP_SIZE, its FLEXIQ_PORT_<NAME> and every rank's
// address in FLEXIQ_PEERS_<NAME>, in rank order) and, when cpus is not
// nil, its share of them.
func groupRanks(svc *config.Service, size, slot int, pick func() (int, error), cpus []cpuset.Set) ([]units.RankSpec, error) {
	plan := portPlan{ports: svc.Ports, size: size, pick: pick}
	ports := make([]map[string]int, size)
	for r := range ports {
		var err error
		if ports[r], err = plan.portsFor(slot, r); err != nil {
			return nil, err
		}
	}
	addr := svc.Address
	if addr == "" {
		addr = config.DefaultServiceAddress
	}
	peers := make(map[string]string, len(svc.Ports))
	for _, p := range svc.Ports {
		all := make([]string, size)
		for r := range all {
			all[r] = net.JoinHostPort(addr, strconv.Itoa(ports[r][p.Name]))
		}
		peers[config.PeersEnvPrefix+strings.TrimPrefix(p.EnvName(), config.PortEnvPrefix)] = strings.Join(all, ",")
	}
	out := make([]units.RankSpec, size)
	for r := range out {
		env := maps.Clone(peers)
		env[config.RankEnv] = strconv.Itoa(r)
		env[config.GroupSizeEnv] = strconv.Itoa(size)
		for _, p := range svc.Ports {
			env[p.EnvName()] = strconv.Itoa(ports[r][p.Name])
		}
		out[r].Environment = env
		if cpus != nil {
			out[r].AllowedCPUs = cpus[r].String()
		}
	}
	return out, nil
}

// gangSpec makes spec the gang group of the pool's size, when the pool has
// groups. An error (no free port, too few CPUs to split) fails the start,
// and the slot backs off as after any failed start.
func (ws *Workers) gangSpec(spec *units.WorkerSpec, taken map[int]bool) error {
	size := ws.Cfg.GroupSize()
	if size < 2 {
		return nil
	}
	svc := ws.Cfg.Service
	var cpus []cpuset.Set
	if svc.CPUSetSplit {
		allowed, err := ws.Gang.AllowedCPUs()
		if err != nil {
			return fmt.Errorf("cpuset_split: %w", err)
		}
		if cpus, err = cpuset.Split(allowed, size); err != nil {
			return fmt.Errorf("cpuset_split: %w", err)
		}
	}
	picker := ws.Gang.NewPicker()
	defer picker.Close()
	ranks, err := groupRanks(svc, size, spec.Slot, skipTaken(picker.Pick, taken), cpus)
	if err != nil {
		return err
	}
	spec.Ranks = ranks
	// The next group of the same round must not get these: the picker's
	// listeners are closed, and the ranks do not listen yet.
	for _, rk := range ranks {
		for _, p := range replicas.PortsFromEnvironment(svc, replicas.EnvList(rk.Environment)) {
			taken[p] = true
		}
	}
	return nil
}

// GangDeps are what gang groups need from the host; tests replace them.
type GangDeps struct {
	NewPicker   func() PortPicker
	AllowedCPUs func() (cpuset.Set, error)
}

func defaultGangDeps() GangDeps {
	return GangDeps{NewPicker: newFreePorts, AllowedCPUs: func() (cpuset.Set, error) { return cpuset.Allowed("/") }}
}

// withGroupShape adds a gang pool's group shape to the spec its revision
// hashes (revisionSpec): the size, the ports as declared, the CPU split,
// so that changing any of them replaces the groups. The ranks' actual
// ports are left out: an "auto" port differs at every start.
func withGroupShape(c *config.Pool, s units.WorkerSpec) units.WorkerSpec {
	size := c.GroupSize()
	if size < 2 {
		return s
	}
	s.Ranks = make([]units.RankSpec, size)
	for r := range s.Ranks {
		env := map[string]string{config.RankEnv: strconv.Itoa(r), config.GroupSizeEnv: strconv.Itoa(size)}
		for _, p := range c.Service.Ports {
			env[p.EnvName()] = "auto"
			if p.Base > 0 {
				env[p.EnvName()] = strconv.Itoa(p.Base)
			}
		}
		s.Ranks[r].Environment = env
		if c.Service.CPUSetSplit {
			s.Ranks[r].AllowedCPUs = "split"
		}
	}
	return s
}

// rankPortsOf are the ports of ranks 1 … N-1 as a group's spec gives them;
// nil for a single unit.
func rankPortsOf(svc *config.Service, ranks []units.RankSpec) []map[string]int {
	if svc == nil || len(ranks) < 2 {
		return nil
	}
	out := make([]map[string]int, 0, len(ranks)-1)
	for _, r := range ranks[1:] {
		out = append(out, replicas.PortsFromEnvironment(svc, replicas.EnvList(r.Environment)))
	}
	return out
}

// listedRankPorts reads an adopted group's ranks' ports back from their
// units' Environment=, as listed (sorted by rank).
func listedRankPorts(svc *config.Service, ranks []units.Worker) []map[string]int {
	if svc == nil || len(ranks) == 0 {
		return nil
	}
	out := make([]map[string]int, 0, len(ranks))
	for _, r := range ranks {
		out = append(out, replicas.PortsFromEnvironment(svc, r.Environment))
	}
	return out
}
