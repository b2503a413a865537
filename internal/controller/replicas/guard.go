package replicas

// A replica's ports must be its own (issue 27, item 1). Auto ports are in
// the unit's Environment=, which any local user may read over D-Bus, and
// fixed ports are base + slot: a local user can bind one before the
// replica does, and a probe that only asks "does something answer?" would
// publish the squatter. So a replica enters discovery only while every
// listener on its declared ports belongs to its unit (internal/portowner:
// the socket's cgroup, or a descriptor held by the unit's processes), and
// the pool checks again every GuardPeriod and at every tick: a replica
// whose port is taken over leaves discovery. A replica held back this way
// is "not ready" for ready_timeout_sec and unready_timeout_sec as any
// other, and is replaced; its auto port is not handed out again while it
// is held. A slot whose fixed port is held gets no start: the pool takes
// the next slot. Each episode is one journal entry (PortHeld).

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/portowner"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

const (
	// GuardPeriod is how often the listeners of a pool's replicas are
	// checked between ticks: one sock_diag dump per pool, whatever its
	// size.
	GuardPeriod = time.Second
	// avoidHeldFor keeps an auto port found held by another out of the
	// ports handed to new replicas; the kernel would not offer it while
	// it is listened on, but may once the squatter moves to another
	// address of it.
	avoidHeldFor = 10 * time.Minute
)

// Fields are the journal fields of a replica's entries (the pool's).
type Fields func(slot int, unit string, extra eventlog.Fields) eventlog.Fields

// Guard is a service pool's record of its replicas' listeners, owned by
// the pool's loop. Its methods are no-ops on a nil Guard (a pool without
// ports).
type Guard struct {
	dump   func() (*portowner.Table, error)
	clock  func() time.Time
	log    *eventlog.Logger
	fields Fields
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

// NewGuard is a pool's Guard; dump nil reads the host's sockets.
func NewGuard(clock func() time.Time, dump func() (*portowner.Table, error), log *eventlog.Logger, fields Fields) *Guard {
	if dump == nil {
		root := units.Cgroup2Root()
		dump = func() (*portowner.Table, error) { return portowner.Dump(root) }
	}
	return &Guard{dump: dump, clock: clock, log: log, fields: fields, ticker: time.NewTicker(GuardPeriod),
		held: map[int]heldPort{}, avoid: map[int]time.Time{}}
}

// Stop ends the guard's ticker.
func (g *Guard) Stop() {
	if g != nil {
		g.ticker.Stop()
	}
}

// C is the channel of the port checks due, nil without a guard.
func (g *Guard) C() <-chan time.Time {
	if g == nil {
		return nil
	}
	return g.ticker.C
}

// Now is the time on the pool's clock.
func (g *Guard) Now() time.Time { return g.clock() }

// Listeners is a Table read after notBefore: a probe's success is judged
// by who listened once it had connected, and the transitions of many
// probes share one dump.
func (g *Guard) Listeners(notBefore time.Time) (*portowner.Table, error) {
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

// Verdict is what a check found of one replica.
type Verdict struct {
	Unit   string
	Port   int
	Holder *portowner.Listener // nil with Err
	Err    error               // the check itself failed
}

func (v *Verdict) Error() string {
	if v.Holder == nil {
		return fmt.Sprintf("cannot tell whose listeners are on the ports of %s: %v", v.Unit, v.Err)
	}
	return fmt.Sprintf("port %d is held by another than %s (uid %d)", v.Port, v.Unit, v.Holder.UID)
}

// Unit is one unit of a replica to check: rank 0, or a gang group's other
// rank. Cgroup and SocketCgroup are the replica's records, filled in by
// ControlGroup once known.
type Unit struct {
	Name        string
	Ports       map[string]int
	SocketPorts []int  // only rank 0 has socket ports
	SocketUnit  string // its socket unit, with SocketPorts
	Cgroup      *string
	SocketCg    *string
}

// Check judges a replica's listeners against its units: nil when all
// are theirs, or none listens yet. controlGroup reads a unit's
// ControlGroup from systemd.
func (g *Guard) Check(notBefore time.Time, us []Unit, controlGroup func(unit string) (string, error)) *Verdict {
	if notBefore.IsZero() {
		notBefore = g.clock()
	}
	tbl, err := g.Listeners(notBefore)
	if err != nil {
		return &Verdict{Unit: us[0].Name, Err: err}
	}
	cgroup := func(unit string, cg *string) error {
		if *cg != "" {
			return nil
		}
		var err error
		*cg, err = controlGroup(unit)
		return err
	}
	for _, u := range us {
		list := List(u.Ports)
		if !slices.ContainsFunc(list, func(p int) bool { return len(tbl.Listeners(p)) > 0 }) {
			continue // nothing listens there yet: nobody to judge
		}
		if err := cgroup(u.Name, u.Cgroup); err != nil {
			return &Verdict{Unit: u.Name, Err: err}
		}
		sock := portowner.Socket{Ports: u.SocketPorts}
		if len(u.SocketPorts) > 0 {
			// Without it (no cgroup realised for the socket, where
			// the kernel has no cgroup BPF) PID 1's own cgroup is
			// still recognised; nothing else is accepted for it.
			_ = cgroup(u.SocketUnit, u.SocketCg)
			sock.Cgroup = *u.SocketCg
		}
		foreign, err := tbl.HeldBesides(*u.Cgroup, list, sock)
		if err != nil {
			return &Verdict{Unit: u.Name, Err: err}
		}
		if len(foreign) > 0 {
			return &Verdict{Unit: u.Name, Port: foreign[0].Port, Holder: &foreign[0]}
		}
	}
	return nil
}

// Note keeps the journal's episodes of the replica in slot: the first
// time a port of it is found held by another (or its check fails), a
// warning naming the port, the holder's uid and PIDs; an auto port (auto)
// is avoided from then on. A nil v ends the slot's episodes.
func (g *Guard) Note(slot int, v *Verdict, auto func(port int) bool) {
	if v == nil {
		for port, h := range g.held {
			if h.slot == slot && h.unit != "" {
				g.heldEnded(port, h, "is its own again")
			}
		}
		return
	}
	h := heldPort{unit: v.Unit, slot: slot}
	if v.Holder != nil {
		h.inode = v.Holder.Inode
	}
	if old, ok := g.held[v.Port]; ok && old == h {
		return
	}
	g.held[v.Port] = h
	f := g.fields(slot, v.Unit, eventlog.Fields{})
	if v.Holder == nil {
		f["FLEXIQ_ERROR"] = v.Err.Error()
		g.log.Event(eventlog.PortHeld, eventlog.Warning, f,
			"%s is kept out of discovery: cannot tell who listens on its ports: %v", v.Unit, v.Err)
		return
	}
	if auto(v.Port) {
		g.avoid[v.Port] = g.clock().Add(avoidHeldFor)
	}
	g.logHeld(f, v.Port, *v.Holder, fmt.Sprintf("%s is kept out of discovery", v.Unit))
}

// logHeld writes the warning of an episode: the port, the holder's uid and
// processes, and what follows.
func (g *Guard) logHeld(f eventlog.Fields, port int, l portowner.Listener, what string) {
	h := g.table.Holders(l)
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
	g.log.Event(eventlog.PortHeld, eventlog.Warning, f,
		"port %d is held by another listener (uid %d, %s): %s", port, l.UID, who, what)
}

// EndHeld ends the episodes whose replica is gone (replaced, stopped),
// and those of slots not started whose fixed port is free again or that
// now have a replica; it forgets the avoided ports whose time is up.
// live is the unit of the replica live in a slot, "" for none.
func (g *Guard) EndHeld(now time.Time, live func(slot int) string) {
	if len(g.held) == 0 {
		return
	}
	g.Listeners(now)
	for port, h := range g.held {
		unit := live(h.slot)
		switch {
		case h.unit != "" && (unit == "" || unit != h.unit && !strings.HasPrefix(h.unit, strings.TrimSuffix(unit, ".service")+"-r")):
			g.heldEnded(port, h, "is no longer a live replica's")
		case h.unit == "" && unit != "":
			g.heldEnded(port, h, "has a replica again")
		case h.unit == "" && g.table != nil && len(g.table.Listeners(port)) == 0:
			g.heldEnded(port, h, "is free again")
		}
	}
	for port, until := range g.avoid {
		if now.After(until) {
			delete(g.avoid, port)
		}
	}
}

func (g *Guard) heldEnded(port int, h heldPort, how string) {
	delete(g.held, port)
	who := h.unit
	if who == "" {
		who = fmt.Sprintf("slot %d", h.slot)
	}
	g.log.Event(eventlog.PortHeld, eventlog.Info, g.fields(h.slot, h.unit, eventlog.Fields{"FLEXIQ_PORT": fmt.Sprint(port)}),
		"port %d of %s %s", port, who, how)
}

// Avoided adds the auto ports found held to taken.
func (g *Guard) Avoided(taken map[int]bool) {
	if g == nil {
		return
	}
	for port := range g.avoid {
		taken[port] = true
	}
}

// HeldSlots are those of slots (free ones, about to get a start) whose
// fixed port someone listens on: no replica of the pool holds it (ours
// says which a replica still stopping holds), so the listener is
// another's, and a replica started there could not serve. The pool
// starts in the next slots instead. Each is one journal entry.
func (g *Guard) HeldSlots(now time.Time, cfg *config.Pool, slots []int, ours func(port int) bool) map[int]bool {
	if g == nil || cfg.GroupSize() >= 2 || !HasFixedPort(cfg.Service) || len(slots) == 0 {
		return nil
	}
	tbl, err := g.Listeners(now)
	if err != nil {
		return nil
	}
	out := map[int]bool{}
	for _, slot := range slots {
		for _, p := range cfg.Service.Ports {
			port := p.Base + slot - 1
			if p.Base == 0 || len(tbl.Listeners(port)) == 0 || ours(port) {
				continue
			}
			out[slot] = true
			if _, ok := g.held[port]; !ok {
				g.held[port] = heldPort{slot: slot, inode: tbl.Listeners(port)[0].Inode}
				g.logHeld(g.fields(slot, units.UnitName(cfg.Name, slot), eventlog.Fields{}), port, tbl.Listeners(port)[0],
					fmt.Sprintf("slot %d (its fixed port %s) gets no replica while it is held; the pool starts in the next free slot", slot, p.Name))
			}
		}
	}
	return out
}
