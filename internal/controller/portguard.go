package controller

// A replica's ports must be its own (issue 27, item 1). Auto ports are in
// the unit's Environment=, which any local user may read over D-Bus, and
// fixed ports are base + slot: a local user can bind one before the
// replica does, and a probe that only asks "does something answer?" would
// publish the squatter. So a replica enters discovery only while every
// listener on its declared ports belongs to its unit (internal/portowner:
// the socket's cgroup, or a descriptor held by the unit's processes), and
// the pool checks again every guardPeriod and at every tick: a replica
// whose port is taken over leaves discovery. A replica held back this way
// is "not ready" for ready_timeout_sec and unready_timeout_sec as any
// other, and is replaced; its auto port is not handed out again while it
// is held. A slot whose fixed port is held gets no start: the pool takes
// the next slot. Each episode is one journal entry (PortHeld).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/replicas"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/portowner"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

const (
	// guardPeriod is how often the listeners of a pool's replicas are
	// checked between ticks: one sock_diag dump per pool, whatever its
	// size.
	guardPeriod = time.Second
	// avoidHeldFor keeps an auto port found held by another out of the
	// ports handed to new replicas; the kernel would not offer it while
	// it is listened on, but may once the squatter moves to another
	// address of it.
	avoidHeldFor = 10 * time.Minute
)

// portGuard is a service pool's record of its replicas' listeners.
type portGuard struct {
	dump   func() (*portowner.Table, error)
	clock  Clock
	table  *portowner.Table
	at     time.Time // when table was read, on the pool's clock
	ticker *time.Ticker
	// held are the ports found held by another, by port: one journal
	// entry when an episode begins, one when it ends.
	held map[int]heldPort
	// avoid are auto ports found held, not handed out before the time.
	avoid map[int]time.Time
}

// heldPort is one episode: port held by another than unit (or, for a
// slot not started, than the pool).
type heldPort struct {
	unit  string
	slot  int
	inode uint64 // the listener's, or 0 for "cannot tell"
}

func newPortGuard(clock Clock, dump func() (*portowner.Table, error)) *portGuard {
	if dump == nil {
		root := units.Cgroup2Root()
		dump = func() (*portowner.Table, error) { return portowner.Dump(root) }
	}
	return &portGuard{dump: dump, clock: clock, ticker: time.NewTicker(guardPeriod), held: map[int]heldPort{}, avoid: map[int]time.Time{}}
}

// guardPorts keeps s's guard in step with cfg's ports: a pool given its
// first port by a reload has its listeners checked from then on, one
// that lost its last has nothing to check.
func (s *service) guardPorts(cfg *config.Pool, clock Clock, dump func() (*portowner.Table, error)) {
	switch has := len(cfg.Service.Ports) > 0; {
	case has && s.guard == nil:
		s.guard = newPortGuard(clock, dump)
	case !has && s.guard != nil:
		s.guard.stop()
		s.guard = nil
	}
}

func (g *portGuard) stop() {
	if g != nil {
		g.ticker.Stop()
	}
}

// guardC is the channel of the port checks due, nil without a guard.
func (s *service) guardC() <-chan time.Time {
	if s == nil || s.guard == nil {
		return nil
	}
	return s.guard.ticker.C
}

// listeners is a Table read after notBefore: a probe's success is judged
// by who listened once it had connected, and the transitions of many
// probes share one dump.
func (g *portGuard) listeners(notBefore time.Time) (*portowner.Table, error) {
	if g.table != nil && g.at.After(notBefore) {
		return g.table, nil
	}
	now := g.clock()
	t, err := g.dump()
	if err != nil {
		return nil, err
	}
	g.table, g.at = t, now
	return t, nil
}

// portVerdict is what a check found of one replica.
type portVerdict struct {
	unit    string
	port    int
	holder  *portowner.Listener // nil with err
	err     error               // the check itself failed
	unknown bool                // err: nothing is known, not even a port
}

func (v *portVerdict) Error() string {
	if v.holder == nil {
		return fmt.Sprintf("cannot tell whose listeners are on the ports of %s: %v", v.unit, v.err)
	}
	return fmt.Sprintf("port %d is held by another than %s (uid %d)", v.port, v.unit, v.holder.UID)
}

// checkPorts judges w's listeners against its units (rank 0, and a gang
// group's other ranks for their ports): nil when all are theirs, or none
// listens yet.
func (ws *workers) checkPorts(w *worker, notBefore time.Time) *portVerdict {
	g := ws.svc.guard
	if g == nil || (len(w.ports) == 0 && len(w.rankPorts) == 0) {
		return nil
	}
	if notBefore.IsZero() {
		notBefore = g.clock()
	}
	tbl, err := g.listeners(notBefore)
	if err != nil {
		return &portVerdict{unit: w.unit, err: err, unknown: true}
	}
	controlGroup := func(unit string, cg *string) error {
		if *cg != "" {
			return nil
		}
		rctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		var err error
		*cg, err = ws.units.ControlGroup(rctx, unit)
		return err
	}
	check := func(unit string, ports map[string]int, socketPorts []int, cg, socketCg *string) *portVerdict {
		list := replicas.List(ports)
		if !slices.ContainsFunc(list, func(p int) bool { return len(tbl.Listeners(p)) > 0 }) {
			return nil // nothing listens there yet: nobody to judge
		}
		if err := controlGroup(unit, cg); err != nil {
			return &portVerdict{unit: unit, err: err, unknown: true}
		}
		sock := portowner.Socket{Ports: socketPorts}
		if len(socketPorts) > 0 {
			// Without it (no cgroup realised for the socket, where
			// the kernel has no cgroup BPF) PID 1's own cgroup is
			// still recognised; nothing else is accepted for it.
			_ = controlGroup(units.SocketName(ws.name, w.slot), socketCg)
			sock.Cgroup = *socketCg
		}
		foreign, err := tbl.HeldBesides(*cg, list, sock)
		if err != nil {
			return &portVerdict{unit: unit, err: err, unknown: true}
		}
		if len(foreign) > 0 {
			return &portVerdict{unit: unit, port: foreign[0].Port, holder: &foreign[0]}
		}
		return nil
	}
	// Only rank 0 has socket ports: a gang group's ranks bind their own.
	if v := check(w.unit, w.ports, replicas.SocketPorts(ws.cfg.Service, w.ports), &w.cgroup, &w.socketCgroup); v != nil {
		return v
	}
	for len(w.rankCgroups) < len(w.rankPorts) {
		w.rankCgroups = append(w.rankCgroups, "")
	}
	for i, rp := range w.rankPorts {
		if v := check(units.RankUnitName(ws.name, w.slot, i+1), rp, nil, &w.rankCgroups[i], nil); v != nil {
			return v
		}
	}
	return nil
}

// guardRound checks every replica that says it is ready: one whose port is
// held by another leaves discovery (or never enters), one whose ports are
// its own again enters. It runs every guardPeriod on the loop, and at
// every reconcile. It reports whether a replica's readiness changed.
func (ws *workers) guardRound(now time.Time) bool {
	if ws.svc == nil || ws.svc.guard == nil {
		return false
	}
	changed := false
	for _, w := range ws.fleet.liveWorkers() {
		if w.claim != repReady {
			continue
		}
		v := ws.checkPorts(w, now)
		ws.noteHeld(w, v)
		switch {
		case v != nil && w.rd == repReady:
			w.notReadySince = now
			ws.applyReadiness(w, repUnready, v)
			changed = true
		case v == nil && w.rd != repReady:
			ws.applyReadiness(w, repReady, nil)
			changed = true
		}
	}
	if len(ws.svc.guard.held) > 0 {
		ws.svc.guard.listeners(now)
		ws.endHeld(now)
	}
	return changed
}

// noteHeld keeps the journal's episodes: the first time a port of w is
// found held by another (or its check fails), a warning naming the port,
// the holder's uid and PIDs; its auto port is avoided from then on.
func (ws *workers) noteHeld(w *worker, v *portVerdict) {
	g := ws.svc.guard
	if v == nil {
		for port, h := range g.held {
			if h.slot == w.slot && h.unit != "" {
				ws.heldEnded(port, h, "is its own again")
			}
		}
		return
	}
	h := heldPort{unit: v.unit, slot: w.slot}
	if v.holder != nil {
		h.inode = v.holder.Inode
	}
	if old, ok := g.held[v.port]; ok && old == h {
		return
	}
	g.held[v.port] = h
	f := ws.workerFields(w.slot, v.unit, eventlog.Fields{})
	if v.holder == nil {
		f["FLEXIQ_ERROR"] = v.err.Error()
		ws.log.Event(eventlog.PortHeld, eventlog.Warning, f,
			"%s is kept out of discovery: cannot tell who listens on its ports: %v", v.unit, v.err)
		return
	}
	if replicas.IsAutoPort(ws.cfg.Service, w.ports, v.port) {
		g.avoid[v.port] = g.clock().Add(avoidHeldFor)
	}
	ws.logHeld(f, v.port, *v.holder, fmt.Sprintf("%s is kept out of discovery", v.unit))
}

// logHeld writes the warning of an episode: the port, the holder's uid and
// processes, and what follows.
func (ws *workers) logHeld(f eventlog.Fields, port int, l portowner.Listener, what string) {
	h := ws.svc.guard.table.Holders(l)
	pids := make([]string, 0, len(h.PIDs))
	for _, p := range h.PIDs[:min(len(h.PIDs), 8)] {
		pids = append(pids, fmt.Sprint(p))
	}
	f["FLEXIQ_PORT"] = fmt.Sprint(port)
	f["FLEXIQ_HOLDER_UID"] = fmt.Sprint(l.UID)
	f["FLEXIQ_HOLDER_PID"] = strings.Join(pids, " ")
	f["FLEXIQ_HOLDER_ADDRESS"] = l.String()
	who := "PID unknown"
	if len(pids) > 0 {
		who = "PID " + strings.Join(pids, ", ")
	}
	if h.Cgroup != "" {
		f["FLEXIQ_HOLDER_CGROUP"] = h.Cgroup
		who += " in " + h.Cgroup
	}
	ws.log.Event(eventlog.PortHeld, eventlog.Warning, f,
		"port %d is held by another listener (uid %d, %s): %s", port, l.UID, who, what)
}

// endHeld ends the episodes whose replica is gone (replaced, stopped),
// and those of slots not started whose fixed port is free again or that
// now have a replica; it forgets the avoided ports whose time is up.
func (ws *workers) endHeld(now time.Time) {
	g := ws.svc.guard
	for port, h := range g.held {
		w := ws.fleet.live[h.slot]
		switch {
		case h.unit != "" && (w == nil || w.unit != h.unit && !strings.HasPrefix(h.unit, strings.TrimSuffix(w.unit, ".service")+"-r")):
			ws.heldEnded(port, h, "is no longer a live replica's")
		case h.unit == "" && w != nil:
			ws.heldEnded(port, h, "has a replica again")
		case h.unit == "" && g.table != nil && len(g.table.Listeners(port)) == 0:
			ws.heldEnded(port, h, "is free again")
		}
	}
	for port, until := range g.avoid {
		if now.After(until) {
			delete(g.avoid, port)
		}
	}
}

func (ws *workers) heldEnded(port int, h heldPort, how string) {
	delete(ws.svc.guard.held, port)
	who := h.unit
	if who == "" {
		who = fmt.Sprintf("slot %d", h.slot)
	}
	ws.log.Event(eventlog.PortHeld, eventlog.Info, ws.workerFields(h.slot, h.unit, eventlog.Fields{"FLEXIQ_PORT": fmt.Sprint(port)}),
		"port %d of %s %s", port, who, how)
}

// avoidedPorts adds the auto ports found held to taken.
func (ws *workers) avoidedPorts(taken map[int]bool) {
	if ws.svc == nil || ws.svc.guard == nil {
		return
	}
	for port := range ws.svc.guard.avoid {
		taken[port] = true
	}
}

// heldSlots are those of slots (free ones, about to get a start) whose
// fixed port someone listens on: no replica of the pool holds it, so the
// listener is another's, and a replica started there could not serve.
// The pool starts in the next slots instead. Each is one journal entry.
func (ws *workers) heldSlots(now time.Time, slots []int) map[int]bool {
	if ws.svc == nil || ws.svc.guard == nil || ws.cfg.GroupSize() >= 2 || !replicas.HasFixedPort(ws.cfg.Service) || len(slots) == 0 {
		return nil
	}
	g := ws.svc.guard
	tbl, err := g.listeners(now)
	if err != nil {
		return nil
	}
	out := map[int]bool{}
	for _, slot := range slots {
		for _, p := range ws.cfg.Service.Ports {
			port := p.Base + slot - 1
			if p.Base == 0 || len(tbl.Listeners(port)) == 0 || ws.drainingHolds(port) {
				continue
			}
			out[slot] = true
			if _, ok := g.held[port]; !ok {
				g.held[port] = heldPort{slot: slot, inode: tbl.Listeners(port)[0].Inode}
				ws.logHeld(ws.workerFields(slot, units.UnitName(ws.name, slot), eventlog.Fields{}), port, tbl.Listeners(port)[0],
					fmt.Sprintf("slot %d (its fixed port %s) gets no replica while it is held; the pool starts in the next free slot", slot, p.Name))
			}
		}
	}
	return out
}

// drainingHolds says whether a replica of the pool still stopping holds
// port: its own listener, not a squatter's.
func (ws *workers) drainingHolds(port int) bool {
	for _, d := range ws.fleet.draining {
		for _, p := range d.ports {
			if p == port {
				return true
			}
		}
	}
	return false
}
