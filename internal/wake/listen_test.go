package wake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The child half of TestSystemdListener: a process started the way systemd
// starts the wake address's service, its socket on descriptor 3.
func init() {
	replica := os.Getenv("FLEXIQ_WAKE_TEST_CHILD")
	if replica == "" {
		return
	}
	// systemd sets LISTEN_PID to the child's PID, which exec.Cmd cannot
	// know in advance.
	os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	ln, err := SystemdListener()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	p := newPool()
	p.set(replica)
	err = New(p, Config{IdleExit: 300 * time.Millisecond}).Serve(context.Background(), ln)
	if !errors.Is(err, ErrIdle) {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(4)
	}
	os.Exit(0)
}

func TestSystemdListener(t *testing.T) {
	replica, served := echoReplica(t)
	ln := listen(t)
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// A connection queued before the process runs, as systemd's socket
	// queues it, is the one that starts it.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("queued")); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FLEXIQ_WAKE_TEST_CHILD="+replica, "LISTEN_FDS=1", "LISTEN_FDNAMES=wake")
	cmd.ExtraFiles = []*os.File{f}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "queued" {
		t.Errorf("the queued connection got %q, %v", got, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("the child: %v: %s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child did not exit after its idle time")
	}
	if served.Load() != 1 {
		t.Fatalf("replica served %d connections, want 1", served.Load())
	}
	// The parent's socket, like systemd's, listens on after the exit.
	c2, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	if err != nil {
		t.Fatalf("after the child's exit: %v", err)
	}
	c2.Close()
}

func TestSystemdListenerWithoutSocket(t *testing.T) {
	t.Setenv("LISTEN_FDS", "")
	if _, err := SystemdListener(); err == nil || !strings.Contains(err.Error(), "LISTEN_FDS") {
		t.Fatalf("err %v, want one naming LISTEN_FDS", err)
	}
}
