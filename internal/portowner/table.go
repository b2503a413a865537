package portowner

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Listener is one listening TCP socket.
type Listener struct {
	Port  int
	Addr  netip.Addr
	UID   uint32 // its owner (the creator's fsuid)
	Inode uint64
	// CgroupID is the cgroup the socket was created in; 0 when the kernel
	// does not say (before 5.7).
	CgroupID uint64
}

func (l Listener) String() string {
	return fmt.Sprintf("%s uid %d inode %d cgroup id %d", netip.AddrPortFrom(l.Addr, uint16(l.Port)), l.UID, l.Inode, l.CgroupID)
}

// Table is one Dump: the listeners by port.
type Table struct {
	root   string
	byPort map[int][]Listener
}

// NewTable is a Table of the given listeners, whose cgroup paths resolve
// under root: Dump's, and tests' (a directory's inode number stands for a
// cgroup id).
func NewTable(root string, ls []Listener) *Table {
	t := &Table{root: root, byPort: map[int][]Listener{}}
	for _, l := range ls {
		t.byPort[l.Port] = append(t.byPort[l.Port], l)
	}
	return t
}

// Listeners are those on port, any address.
func (t *Table) Listeners(port int) []Listener { return t.byPort[port] }

// Held returns the listeners on ports that are not the unit's whose
// control group (systemd's ControlGroup, relative to the cgroup2 mount)
// is cgroup; none means every listener there is the unit's, or nothing
// listens. An error says the unit could not be read (its cgroup is gone,
// say) while something listens: whose it is cannot be told.
func (t *Table) Held(cgroup string, ports []int) ([]Listener, error) {
	return t.HeldBesides(cgroup, ports, Socket{})
}

// managerCgroup is where PID 1 runs, relative to the cgroup2 mount.
const managerCgroup = "init.scope"

// Socket is a unit's socket unit: systemd binds its ports and hands them
// to the unit.
type Socket struct {
	Cgroup string // the socket unit's ControlGroup
	Ports  []int
}

// HeldBesides is Held where a listener on one of sock's ports may also be
// the unit's socket unit's. systemd creates a socket unit's IP sockets in
// a helper forked into the socket unit's cgroup (so that its BPF firewall
// applies), or in PID 1 itself (init.scope) where the kernel has no
// cgroup BPF; either way as uid 0. Only PID 1 places processes in either
// cgroup, and a second listener on the port with SO_REUSEPORT would need
// uid 0 as well, so the socket's cgroup alone names it, whatever user the
// replica runs as, without reading its descriptors (which would need
// CAP_SYS_PTRACE).
func (t *Table) HeldBesides(cgroup string, ports []int, sock Socket) ([]Listener, error) {
	var seen []Listener
	for _, p := range ports {
		seen = append(seen, t.byPort[p]...)
	}
	if len(seen) == 0 {
		return nil, nil
	}
	dir := filepath.Join(t.root, cgroup)
	id, err := inodeOf(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the cgroup of %s: %w", cgroup, err)
	}
	var bySystemd map[uint64]bool
	if len(sock.Ports) > 0 {
		// A cgroup not found matches no listener; the descriptor rule
		// below still applies.
		bySystemd = map[uint64]bool{}
		for _, cg := range []string{sock.Cgroup, managerCgroup} {
			if id, err := inodeOf(filepath.Join(t.root, cg)); err == nil && cg != "" {
				bySystemd[id] = true
			}
		}
	}
	var facts *unitFacts
	var foreign []Listener
	for _, l := range seen {
		if l.CgroupID != 0 && l.CgroupID == id {
			continue // the common case: created in the unit's own cgroup
		}
		if l.CgroupID != 0 && bySystemd[l.CgroupID] && l.UID == 0 && slices.Contains(sock.Ports, l.Port) {
			continue // bound by systemd for the unit's socket unit
		}
		if facts == nil {
			f, err := readUnit(dir)
			if err != nil {
				return nil, fmt.Errorf("reading the processes of %s: %w", cgroup, err)
			}
			facts = &f
		}
		if judge(l, *facts) == notTheUnits {
			foreign = append(foreign, l)
		}
	}
	return foreign, nil
}

// rule is how a listener was found to be the unit's.
type rule int

const (
	notTheUnits  rule = iota
	byCgroup          // created in the unit's cgroup or one below it
	byDescriptor      // held open by a process of the unit
	byUID             // no cgroup id, descriptors unreadable: the unit's uid
)

// unitFacts is what judge needs of a unit.
type unitFacts struct {
	cgroupIDs map[uint64]bool // the unit's cgroup and those below it
	inodes    map[uint64]bool // the sockets its processes hold, of those that could be read
	// unreadable: some process's descriptors could not be read (another
	// user's, without CAP_SYS_PTRACE).
	unreadable bool
	uids       map[uint32]bool // of its processes (real uid)
}

// judge says whether l is the unit's, and by which rule.
func judge(l Listener, u unitFacts) rule {
	switch {
	case l.CgroupID != 0 && u.cgroupIDs[l.CgroupID]:
		return byCgroup
	case u.inodes[l.Inode]:
		return byDescriptor
	case l.CgroupID == 0 && u.unreadable && u.uids[l.UID]:
		return byUID
	}
	return notTheUnits
}

// readUnit gathers a unit's facts from its cgroup directory: the ids of
// it and its children (a unit with Delegate= may place its processes
// below), its processes, their uids and the sockets they hold.
func readUnit(dir string) (unitFacts, error) {
	u := unitFacts{cgroupIDs: map[uint64]bool{}, inodes: map[uint64]bool{}, uids: map[uint32]bool{}}
	var pids []int
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, os.ErrNotExist) {
				return nil // a child cgroup removed meanwhile
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		id, err := inodeOf(p)
		if err != nil {
			return nil
		}
		u.cgroupIDs[id] = true
		ps, _ := readProcs(p)
		pids = append(pids, ps...)
		return nil
	})
	if err != nil {
		return unitFacts{}, err
	}
	for _, pid := range pids {
		if uid, ok := procUID(pid); ok {
			u.uids[uid] = true
		}
		socks, err := socketInodes(pid)
		switch {
		case err == nil:
			for _, s := range socks {
				u.inodes[s] = true
			}
		case !errors.Is(err, os.ErrNotExist):
			u.unreadable = true
		}
	}
	return u, nil
}

// Holder is who holds a foreign listener, for the journal.
type Holder struct {
	UID    uint32
	PIDs   []int  // the processes holding it, or those of its cgroup when their descriptors cannot be read; none if unknown
	Cgroup string // its cgroup's path, "" if unknown
}

// Holders finds who holds l: the processes of the cgroup it was created
// in (found by its id under the cgroup2 mount), narrowed to those whose
// descriptors show it where they can be read. It walks the cgroup tree:
// once per episode, not per check.
func (t *Table) Holders(l Listener) Holder {
	h := Holder{UID: l.UID}
	if l.CgroupID == 0 || t.root == "" {
		return h
	}
	var found string
	filepath.WalkDir(t.root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil // a cgroup removed meanwhile, or unreadable: go on
		}
		if !d.IsDir() {
			return nil
		}
		if id, err := inodeOf(p); err == nil && id == l.CgroupID {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	if found == "" {
		return h
	}
	h.Cgroup = "/" + strings.TrimPrefix(strings.TrimPrefix(found, t.root), "/")
	pids, _ := readProcs(found)
	var holding []int
	for _, pid := range pids {
		if socks, err := socketInodes(pid); err == nil && slices.Contains(socks, l.Inode) {
			holding = append(holding, pid)
		}
	}
	h.PIDs = pids
	if len(holding) > 0 {
		h.PIDs = holding
	}
	return h
}

func inodeOf(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
