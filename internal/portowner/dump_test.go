package portowner

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// cgroup2 is where this process sees the cgroup2 mount, and its own
// cgroup there; the test is skipped without one.
func cgroup2(t *testing.T) (root, own string) {
	t.Helper()
	mounts, err := procfs.GetMounts()
	if err != nil {
		t.Skip(err)
	}
	for _, m := range mounts {
		if m.FSType == "cgroup2" && root == "" {
			root = m.MountPoint
		}
	}
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "0::"); ok {
			own = rest
		}
	}
	if root == "" || own == "" {
		t.Skip("no cgroup2 hierarchy")
	}
	return root, own
}

// listen listens on a loopback port of this process and returns the
// port and the socket's inode, as /proc/self/fd shows it.
func listen(t *testing.T, network, addr string) (int, uint64) {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("%s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { l.Close() })
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return l.Addr().(*net.TCPAddr).Port, st.Ino
}

// TestDumpFindsOwnListener: the kernel's answer, parsed, is this
// process's socket: its port, inode, uid and cgroup; Held finds it this
// process's cgroup's and not another cgroup's, and Holders names this
// process.
func TestDumpFindsOwnListener(t *testing.T) {
	root, own := cgroup2(t)
	for _, c := range []struct{ network, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		t.Run(c.network, func(t *testing.T) {
			port, inode := listen(t, c.network, c.addr)
			tbl, err := Dump(root)
			if err != nil {
				t.Fatal(err)
			}
			ls := tbl.Listeners(port)
			if len(ls) != 1 || ls[0].Inode != inode || ls[0].UID != uint32(os.Geteuid()) {
				t.Fatalf("listeners on %d = %v, want inode %d uid %d", port, ls, inode, os.Geteuid())
			}
			wantID, err := inodeOf(filepath.Join(root, own))
			if err != nil {
				t.Fatal(err)
			}
			if ls[0].CgroupID != wantID {
				t.Errorf("cgroup id %d, want %d, the inode of %s (kernel %s)", ls[0].CgroupID, wantID, own, kernel())
			}
			if foreign, err := tbl.Held(own, []int{port}); err != nil || len(foreign) != 0 {
				t.Errorf("Held(own cgroup) = %v, %v; want the listener to be ours", foreign, err)
			}
			// Another unit's cgroup: a real one where the host has one,
			// else a directory of its own standing for one.
			otherTbl, other := tbl, otherCgroup(root, own)
			if other == "" {
				fake, _ := fakeCgroups(t, map[string][]int{"/other.service": nil})
				otherTbl, other = NewTable(fake, ls), "/other.service"
			}
			if foreign, err := otherTbl.Held(other, []int{port}); err != nil || len(foreign) != 1 {
				t.Errorf("Held(%s) = %v, %v; want this process's listener foreign", other, foreign, err)
			}
			h := tbl.Holders(ls[0])
			if h.Cgroup != own || (os.Geteuid() == 0 && !slices.Equal(h.PIDs, []int{os.Getpid()})) {
				t.Errorf("Holders = %+v, want cgroup %s and this process (%d)", h, own, os.Getpid())
			}
		})
	}
}

// TestDumpReportsTheCreatorsUID: a socket created with another fsuid
// (as a squatter's would be) carries that uid.
func TestDumpReportsTheCreatorsUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change the fsuid")
	}
	root, _ := cgroup2(t)
	const nobody = 65534
	runtime.LockOSThread()
	unix.Setfsuid(nobody)
	port, inode := listen(t, "tcp4", "127.0.0.1:0")
	unix.Setfsuid(0)
	runtime.UnlockOSThread()
	tbl, err := Dump(root)
	if err != nil {
		t.Fatal(err)
	}
	if ls := tbl.Listeners(port); len(ls) != 1 || ls[0].UID != nobody || ls[0].Inode != inode {
		t.Errorf("listeners on %d = %v, want uid %d inode %d", port, ls, nobody, inode)
	}
}

// otherCgroup is a cgroup that neither holds this process nor is above
// it, or "" if there is none to read.
func otherCgroup(root, own string) string {
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		cg := "/" + e.Name()
		if e.IsDir() && own != cg && !strings.HasPrefix(own, cg+"/") {
			return cg
		}
	}
	return ""
}

func kernel() string {
	var u unix.Utsname
	unix.Uname(&u)
	return unix.ByteSliceToString(u.Release[:])
}

// BenchmarkDump is one round's cost: the dump of every listener on the
// host.
func BenchmarkDump(b *testing.B) {
	for range 200 {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
	}
	for b.Loop() {
		if _, err := Dump(""); err != nil {
			b.Fatal(err)
		}
	}
}
