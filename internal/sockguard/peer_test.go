package sockguard

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestMain lets the test binary be a client of its own: a process that
// connects and exits at once, as the test's child.
func TestMain(m *testing.M) {
	if path := os.Getenv("SOCKGUARD_DIAL"); path != "" {
		c, err := net.Dial("unix", path)
		if err != nil {
			os.Exit(2)
		}
		c.Write([]byte("x"))
		os.Exit(0) // without closing: the kernel keeps the socket for the reader
	}
	os.Exit(m.Run())
}

// The credentials are the connecting process's, as the kernel recorded them
// at connect(2), and outlive it: a process that connects, hands the socket
// on (here: leaves it to the kernel) and exits is still judged by its own
// groups, never by a lookup after the fact.
func TestPeerOf(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s")
	l, err := Listen(path, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket: %v %v", fi.Mode(), err)
	}

	// This process.
	go func() {
		if c, err := net.Dial("unix", path); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	p, err := PeerOf(c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	groups, _ := os.Getgroups()
	want := make([]uint32, len(groups))
	for i, g := range groups {
		want[i] = uint32(g)
	}
	slices.Sort(want)
	slices.Sort(p.Groups)
	if p.PID != int32(os.Getpid()) || p.UID != uint32(os.Getuid()) || p.GID != uint32(os.Getgid()) || !slices.Equal(p.Groups, want) {
		t.Errorf("PeerOf: %+v, want pid %d uid %d gid %d groups %v", p, os.Getpid(), os.Getuid(), os.Getgid(), want)
	}

	// A child with groups of its own, gone before the accept.
	if os.Getuid() != 0 {
		t.Skip("the child with other groups needs root")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SOCKGUARD_DIAL="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: 4000, Groups: []uint32{4242, 4243}}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	c, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err = PeerOf(c)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(p.Groups)
	if p.PID != int32(cmd.Process.Pid) || p.GID != 4000 || !slices.Equal(p.Groups, []uint32{4242, 4243}) || !p.InGroup(4000) || p.InGroup(1) {
		t.Errorf("the exited child: %+v, want pid %d gid 4000 groups [4242 4243]", p, cmd.Process.Pid)
	}
}

// The caps' arithmetic, root's slots apart from the total.
func TestTake(t *testing.T) {
	l := Config{Limits: Limits{PerUID: 2, Total: 3}}.Listener(nil)
	steps := []struct {
		uid uint32
		ok  bool
	}{
		{1, true}, {1, true}, {1, false}, // per uid
		{2, true}, {3, false}, // total
		{0, true}, {0, true}, {0, false}, // root: its own cap, not the total
	}
	for i, s := range steps {
		if got := l.take(s.uid) == ""; got != s.ok {
			t.Fatalf("step %d, uid %d: admitted %v, want %v", i, s.uid, got, s.ok)
		}
	}
	l.release(1)
	if l.take(3) != "" {
		t.Error("a released slot was not given back")
	}
	if all, root := l.Held(); all != 5 || root != 2 {
		t.Errorf("held %d (root %d), want 5 (2)", all, root)
	}
}
