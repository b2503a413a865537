package portowner

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func TestJudge(t *testing.T) {
	unit := unitFacts{
		cgroupIDs: map[uint64]bool{100: true, 101: true}, // the unit's and a delegated child
		inodes:    map[uint64]bool{5000: true},
		uids:      map[uint32]bool{998: true},
	}
	unreadable := unit
	unreadable.unreadable = true
	cases := []struct {
		name string
		l    Listener
		u    unitFacts
		want rule
	}{
		{"created in the unit's cgroup", Listener{CgroupID: 100, UID: 998, Inode: 1}, unit, byCgroup},
		{"created in a cgroup below the unit's", Listener{CgroupID: 101, UID: 998, Inode: 1}, unit, byCgroup},
		{"another cgroup, same uid: a squatter of the unit's own user", Listener{CgroupID: 7, UID: 998, Inode: 1}, unit, notTheUnits},
		{"another cgroup, another uid", Listener{CgroupID: 7, UID: 65534, Inode: 1}, unit, notTheUnits},
		{"PID 1's cgroup, held by the unit (socket activation)", Listener{CgroupID: 2, UID: 0, Inode: 5000}, unit, byDescriptor},
		{"no cgroup id, held by the unit", Listener{UID: 998, Inode: 5000}, unit, byDescriptor},
		{"no cgroup id, descriptors read, not held", Listener{UID: 998, Inode: 1}, unit, notTheUnits},
		{"no cgroup id, descriptors unreadable, the unit's uid", Listener{UID: 998, Inode: 1}, unreadable, byUID},
		{"no cgroup id, descriptors unreadable, another uid", Listener{UID: 65534, Inode: 1}, unreadable, notTheUnits},
		{"a cgroup id that is not the unit's: uid never suffices", Listener{CgroupID: 7, UID: 998, Inode: 1}, unreadable, notTheUnits},
		{"a unit with no processes", Listener{CgroupID: 7, UID: 998, Inode: 1}, unitFacts{cgroupIDs: map[uint64]bool{100: true}}, notTheUnits},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := judge(c.l, c.u); got != c.want {
				t.Errorf("judge(%v) = %d, want %d", c.l, got, c.want)
			}
		})
	}
}

// fakeCgroups makes a cgroup tree of plain directories under a temp dir,
// whose inode numbers stand for cgroup ids; procs are each one's
// cgroup.procs.
func fakeCgroups(t *testing.T, procs map[string][]int) (string, map[string]uint64) {
	t.Helper()
	root := t.TempDir()
	ids := map[string]uint64{}
	for cg, pids := range procs {
		dir := filepath.Join(root, cg)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var b []byte
		for _, p := range pids {
			b = strconv.AppendInt(b, int64(p), 10)
			b = append(b, '\n')
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for cg := range procs {
		id, err := inodeOf(filepath.Join(root, cg))
		if err != nil {
			t.Fatal(err)
		}
		ids[cg] = id
	}
	return root, ids
}

func TestHeld(t *testing.T) {
	const web1, web2, squat = "/flexiq.slice/flexiq-web@1.service", "/flexiq.slice/flexiq-web@2.service", "/system.slice/run-squat.service"
	// No processes: the cgroup rule alone decides (the descriptor rule
	// would need real ones; TestDump has them).
	const web1Socket = "/system.slice/system-flexiq\\x2dweb.slice/flexiq-web@1.socket"
	root, ids := fakeCgroups(t, map[string][]int{web1: nil, web2: nil, squat: nil, "/init.scope": nil, web1Socket: nil})
	lo := netip.MustParseAddr("127.0.0.1")
	tbl := NewTable(root, []Listener{
		{Port: 8001, Addr: lo, CgroupID: ids[web1], UID: 998, Inode: 11},
		{Port: 8002, Addr: lo, CgroupID: ids[squat], UID: 65534, Inode: 12},
		{Port: 8003, Addr: lo, CgroupID: ids[web2], UID: 998, Inode: 13},
		{Port: 8003, Addr: netip.IPv6Loopback(), CgroupID: ids[squat], UID: 65534, Inode: 14},
		// Bound by systemd for a socket unit, in PID 1 and in the socket
		// unit's cgroup; and made there by another uid, which systemd
		// never does.
		{Port: 8004, Addr: lo, CgroupID: ids["/init.scope"], UID: 0, Inode: 15},
		{Port: 8005, Addr: lo, CgroupID: ids["/init.scope"], UID: 65534, Inode: 16},
		{Port: 8006, Addr: lo, CgroupID: ids[web1Socket], UID: 0, Inode: 17},
	})
	cases := []struct {
		name    string
		cgroup  string
		ports   []int
		sockets []int    // ports of the unit's socket unit
		foreign []uint64 // their inodes
	}{
		{"its own listener", web1, []int{8001}, nil, nil},
		{"nothing listens yet", web1, []int{9999}, nil, nil},
		{"a squatter on its port", web1, []int{8001, 8002}, nil, []uint64{12}},
		{"another replica's port is foreign too", web1, []int{8003}, nil, []uint64{13, 14}},
		{"its listener, and a squatter on another address of the port", web2, []int{8003}, nil, []uint64{14}},
		{"PID 1's listener on its socket port", web1, []int{8004}, []int{8004}, nil},
		{"PID 1's listener on a port that is not a socket port", web1, []int{8004}, nil, []uint64{15}},
		{"a socket port is no licence for a squatter", web1, []int{8002}, []int{8002}, []uint64{12}},
		{"init.scope's cgroup but not uid 0", web1, []int{8005}, []int{8005}, []uint64{16}},
		{"its socket unit's listener", web1, []int{8006}, []int{8006}, nil},
		{"another unit's socket unit's listener", web2, []int{8006}, []int{8006}, []uint64{17}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sock := Socket{Ports: c.sockets}
			if c.cgroup == web1 {
				sock.Cgroup = web1Socket
			}
			got, err := tbl.HeldBesides(c.cgroup, c.ports, sock)
			if err != nil {
				t.Fatal(err)
			}
			var inodes []uint64
			for _, l := range got {
				inodes = append(inodes, l.Inode)
			}
			if !slices.Equal(inodes, c.foreign) {
				t.Errorf("foreign = %v, want inodes %v", got, c.foreign)
			}
		})
	}
	if _, err := tbl.Held("/flexiq.slice/gone.service", []int{8001}); err == nil {
		t.Error("a unit whose cgroup is gone, with a listener on its port: no error")
	}
	if got, err := tbl.Held("/flexiq.slice/gone.service", []int{9999}); err != nil || got != nil {
		t.Errorf("a unit whose cgroup is gone, nothing on its port: %v, %v; want nothing to judge", got, err)
	}
	h := tbl.Holders(tbl.Listeners(8002)[0])
	if h.Cgroup != squat || h.UID != 65534 {
		t.Errorf("Holders = %+v, want cgroup %s uid 65534", h, squat)
	}
}
