package controller

// Gang groups (issue 19): a service pool whose group size N is 2 or more
// runs each worker (each slot) as N units, ranks 0 … N-1, that systemd
// starts in one transaction and binds together (units.WorkerSpec.Ranks).
// The pool counts, scales and backs off groups; rank 0 stands for its
// group everywhere a worker is named (the listing, the fleet, readiness,
// discovery). What this file adds:
//
//   - each rank's environment: its rank, the group size, its ports and its
//     peers' ADDRESS:PORT per port, and with cpuset_split its own CPUs;
//   - reading a group's end out of a listing: the rank that exited, for
//     the one crash event of the group;
//   - the units of a group that outlive its rank 0, which keep its slot
//     taken until systemd is done with them.

import (
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/replicas"
	"github.com/flexiq/flexiq-scaled/internal/cpuset"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// portPicker hands out free TCP ports. Each port it picked stays held
// until close, so that no two ranks of one group get the same one.
type portPicker interface {
	pick() (int, error)
	close()
}

// freePorts picks ports the kernel says are free, by listening on port 0
// of every address; the listeners are closed once the group's environment
// is written, and the ranks bind the ports when they start. Another
// process may take one meanwhile: the rank then fails to bind, which is a
// failed start with backoff, and the next start picks again.
type freePorts struct{ held []net.Listener }

func newFreePorts() portPicker { return &freePorts{} }

func (f *freePorts) pick() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	f.held = append(f.held, l)
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (f *freePorts) close() {
	for _, l := range f.held {
		l.Close()
	}
	f.held = nil
}

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
func (ws *workers) gangSpec(spec *units.WorkerSpec) error {
	size := ws.cfg.GroupSize()
	if size < 2 {
		return nil
	}
	svc := ws.cfg.Service
	var cpus []cpuset.Set
	if svc.CPUSetSplit {
		allowed, err := ws.gang.allowedCPUs()
		if err != nil {
			return fmt.Errorf("cpuset_split: %w", err)
		}
		if cpus, err = cpuset.Split(allowed, size); err != nil {
			return fmt.Errorf("cpuset_split: %w", err)
		}
	}
	picker := ws.gang.newPicker()
	defer picker.close()
	ranks, err := groupRanks(svc, size, spec.Slot, picker.pick, cpus)
	if err != nil {
		return err
	}
	spec.Ranks = ranks
	return nil
}

// gangDeps are what gang groups need from the host; tests replace them.
type gangDeps struct {
	newPicker   func() portPicker
	allowedCPUs func() (cpuset.Set, error)
}

func defaultGangDeps() gangDeps {
	return gangDeps{newPicker: newFreePorts, allowedCPUs: func() (cpuset.Set, error) { return cpuset.Allowed("/") }}
}

// listedGroupSize is the group size of a listed worker: its FLEXIQ_GROUP_SIZE
// when its environment was read, else its ranks as listed. A worker
// started before its pool had groups is a group of one.
func listedGroupSize(w units.Worker) int {
	for _, kv := range w.Environment {
		if v, ok := strings.CutPrefix(kv, config.GroupSizeEnv+"="); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 1 {
				return n
			}
		}
	}
	return 1 + len(w.Ranks)
}

// rankExit is the rank whose end broke a gang group.
type rankExit struct {
	rank   int // -1: no rank is left loaded to tell
	unit   string
	w      units.Worker // as listed; zero when not listed
	loaded bool
}

// groupExit finds, in the listing of the group whose rank 0 is the unit
// rank0 (w, with its Ranks; zero and listed false when rank 0 is not
// listed), the rank that ended it: the failed one that went down first
// (units.FirstFailed), else one that is gone (it exited and was
// unloaded), else one that is stopping. ok is false while every rank
// runs. When every rank is gone, there is no telling which exited first:
// rank is -1.
func groupExit(rank0 string, w units.Worker, listed bool, size int) (rankExit, bool) {
	pool, slot, _ := units.ParseUnitName(rank0)
	byRank := make([]*units.Worker, size)
	if own, ok := ownRank0(w, listed); ok {
		byRank[0] = &own
	}
	for i := range w.Ranks {
		if r := w.Ranks[i].Rank; r > 0 && r < size {
			byRank[r] = &w.Ranks[i]
		}
	}
	state := func(r int) unitState {
		if byRank[r] == nil {
			return stateGone
		}
		return classify(*byRank[r], true)
	}
	var up []units.Worker // the ranks not gone, each with its rank
	for r, rk := range byRank {
		if state(r) != stateGone {
			up = append(up, *rk)
			up[len(up)-1].Rank = r
		}
	}
	if len(up) == 0 {
		return rankExit{rank: -1}, true
	}
	exit := func(r int) (rankExit, bool) {
		e := rankExit{rank: r, unit: rankUnit(pool, slot, r)}
		if byRank[r] != nil {
			e.w, e.loaded = *byRank[r], state(r) != stateGone
		}
		return e, true
	}
	if i := units.FirstFailed(up); i >= 0 {
		return exit(up[i].Rank)
	}
	for _, down := range []unitState{stateGone, stateStopping} {
		for r := range byRank {
			if state(r) == down {
				return exit(r)
			}
		}
	}
	return rankExit{}, false
}

// ownRank0 is rank 0 of a listed group as its own unit, not as the group
// it speaks for in a listing (units.Worker.Ranks: there its states are
// the group's, and its Result and exit those of the rank that failed
// first, which are not rank 0's and are blanked here). ok is false when
// rank 0 is not loaded.
func ownRank0(w units.Worker, listed bool) (units.Worker, bool) {
	if !listed || w.Missing {
		return units.Worker{}, false
	}
	own := w
	own.Ranks = nil
	if len(w.Ranks) > 0 && w.UnitActiveState != "" {
		own.ActiveState, own.SubState = w.UnitActiveState, w.UnitSubState
		if w.ActiveState == "failed" && w.FailedRank != 0 {
			own.Result, own.ExecMainCode, own.ExecMainStatus = "", 0, 0
		}
	}
	return own, true
}

// rankUnit is the unit of rank r of the group in slot.
func rankUnit(pool string, slot, r int) string {
	if r == 0 {
		return units.UnitName(pool, slot)
	}
	return units.RankUnitName(pool, slot, r)
}

// brokenGroup says whether a live group whose rank 0 still runs or is
// stopping (st) has lost another rank, and which one.
func brokenGroup(lw *worker, w units.Worker, st unitState) (rankExit, bool) {
	if lw.size < 2 || (st != stateRunning && st != stateStopping) {
		return rankExit{}, false
	}
	e, ok := groupExit(lw.unit, w, true, lw.size)
	if !ok || e.rank == 0 {
		// Rank 0 alone stopping is a stop from outside, as for a
		// single unit.
		return rankExit{}, false
	}
	return e, true
}

// breakGroup ends a live group that has lost rank e.rank while its rank 0
// (w, as listed) is still up: a crash of the group, whose units hold its
// slot until they are gone. Its running units are stopped, should
// systemd's binding of the ranks not have done it already.
func (f *fleet) breakGroup(now time.Time, lw *worker, w units.Worker, e rankExit, r *reconciled) {
	delete(f.live, lw.slot)
	if !lw.since.IsZero() && now.Sub(lw.since) >= backoffReset {
		delete(f.backoff, lw.slot)
	}
	r.crashed = append(r.crashed, crash{worker: lw, unit: w, loaded: true, delay: f.armBackoff(lw.slot, now), exit: &e})
	f.draining[lw.unit] = drainingUnit{slot: lw.slot, ours: true, rank: true}
	// st is the group's state; whether rank 0 itself still runs is its own.
	if own, ok := ownRank0(w, true); ok && classify(own, true) == stateRunning {
		r.stops = appendNew(r.stops, lw.unit)
	}
	for _, rk := range w.Ranks {
		switch classify(rk, true) {
		case stateRunning:
			r.stops = appendNew(r.stops, rk.Unit)
			f.draining[rk.Unit] = drainingUnit{slot: lw.slot, ours: true, rank: true}
		case stateStopping:
			f.draining[rk.Unit] = drainingUnit{slot: lw.slot, ours: true, rank: true}
		}
	}
}

// holdRanks keeps the slot of a group taken while any of its ranks is
// still loaded and not failed after its rank 0 is gone (a crash, or the
// end of a drain): such a rank joins the draining units, quietly, as the
// group's end has been reported. A rank that still runs with no rank 0 is
// stopped. Failed ranks are reset, so that their names can be used again.
// While rank 0 is live or draining, it holds the slot for the group.
func (f *fleet) holdRanks(listed []units.Worker, r *reconciled) {
	for _, w := range listed {
		if len(w.Ranks) == 0 {
			continue
		}
		lw, live := f.live[w.Slot]
		_, draining := f.draining[w.Unit]
		held := (live && lw.unit == w.Unit) || draining
		for _, rk := range w.Ranks {
			switch st := classify(rk, true); {
			case st == stateFailed:
				r.resets = appendNew(r.resets, rk.Unit)
			case held || st == stateGone:
			default:
				if _, ok := f.draining[rk.Unit]; !ok {
					f.draining[rk.Unit] = drainingUnit{slot: w.Slot, ours: true, rank: true}
				}
				if st == stateRunning {
					r.stops = appendNew(r.stops, rk.Unit)
				}
			}
		}
	}
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
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
