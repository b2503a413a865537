package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
	"github.com/flexiq/flexiq-scaled/test/servers"
)

// The fleet tests' layout (issue 20): a server sandbox and two hosts on one
// bridge. The hosts reach the server's Redis and PostgreSQL and nothing
// beyond the net; a host whose link is down cannot, and can again once it
// is up; netem delays one sandbox's link; and the host is left with exactly
// the links it had.
func TestNetJoinsSandboxes(t *testing.T) {
	sandbox.Get(t)
	if why := sandbox.NetUnsupported(); why != "" {
		t.Skip(why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	linksBefore := hostLinks(t)
	n := sandbox.NewNet(t, "fleet", "10.77.0.0/24")
	sbs := bootOnNet(t, ctx, n, "netsrv", "neth1", "neth2")
	srv, h1, h2 := sbs[0], sbs[1], sbs[2]
	for _, sb := range sbs {
		if !n.Prefix.Contains(sb.IP()) {
			t.Fatalf("sandbox %s: address %v outside %s", sb.Name, sb.IP(), n.Prefix)
		}
		// A route beyond the net would reach the host or further.
		if out, err := sb.Exec(ctx, "ip", "route", "get", "192.0.2.1"); err == nil {
			t.Errorf("sandbox %s has a route off the net: %s", sb.Name, out)
		}
	}

	url := servers.RedisOn(t, srv)
	t.Logf("redis at %s", url)
	ping := func(sb *sandbox.Sandbox) error {
		out, err := sb.Exec(ctx, "timeout", "3", "redis-cli", "-h", srv.IP().String(), "ping")
		if err == nil && strings.TrimSpace(out) != "PONG" {
			err = fmt.Errorf("redis-cli ping from %s said %q", sb.Name, out)
		}
		return err
	}
	for _, h := range []*sandbox.Sandbox{h1, h2} {
		if err := ping(h); err != nil {
			t.Fatalf("host %s cannot reach the server: %v", h.Name, err)
		}
	}

	t.Run("link down and up", func(t *testing.T) {
		if err := h2.LinkDown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := ping(h2); err == nil {
			t.Errorf("%s reached the server with its link down", h2.Name)
		}
		if err := ping(h1); err != nil {
			t.Errorf("%s lost the server when %s's link went down: %v", h1.Name, h2.Name, err)
		}
		if err := h2.LinkUp(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, state := sandbox.Eventually(15*time.Second, func() (bool, string) {
			err := ping(h2)
			return err == nil, fmt.Sprint(err)
		}); !ok {
			t.Errorf("%s never reached the server again after link up: %s", h2.Name, state)
		}
	})

	t.Run("link delay", func(t *testing.T) { checkDelay(t, ctx, srv, h1) })

	t.Run("postgres on the net", func(t *testing.T) {
		pg := servers.PostgresOn(t, srv, "fleet", "pw")
		t.Logf("postgres at %s", pg)
		out, err := h1.Exec(ctx, "env", "PGPASSWORD=pw", "psql", "-X", "-A", "-t", "-h", srv.IP().String(), "-U", "fleet", "-d", "fleet", "-c", "SELECT 40+2")
		if err != nil || strings.TrimSpace(out) != "42" {
			t.Errorf("psql from %s: %q %v", h1.Name, out, err)
		}
	})

	for _, sb := range sbs {
		if err := sb.Stop(ctx); err != nil {
			t.Errorf("stopping %s: %v", sb.Name, err)
		}
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Veths go with their sandbox's namespace, which the kernel tears down
	// asynchronously; the keeper deletes them too, so this settles at once.
	if ok, state := sandbox.Eventually(10*time.Second, func() (bool, string) {
		after := hostLinks(t)
		return after == linksBefore, after
	}); !ok {
		t.Errorf("the host's links changed:\nbefore: %s\nafter:  %s", linksBefore, state)
	}
	ours := []string{n.Bridge}
	for _, sb := range sbs {
		ours = append(ours, sb.NetLink)
	}
	if ok, state := sandbox.Eventually(10*time.Second, func() (bool, string) {
		var left []string
		for _, l := range ours {
			if _, err := os.Stat("/sys/class/net/" + l); err == nil {
				left = append(left, l)
			}
		}
		return len(left) == 0, strings.Join(left, " ")
	}); !ok {
		t.Errorf("links left on the host: %s", state)
	}
}

// checkDelay times a redis round trip from h to srv before and with a 2 s
// delay on srv's link (netem, or the NFQUEUE stand-in): it should grow by about 2 s (one delayed
// direction per round trip; the connect and the PING each take one).
func checkDelay(t *testing.T, ctx context.Context, srv, h *sandbox.Sandbox) {
	timed := func() time.Duration {
		t0 := time.Now()
		if out, err := h.Exec(ctx, "timeout", "20", "redis-cli", "-h", srv.IP().String(), "ping"); err != nil {
			t.Fatalf("ping: %v %s", err, out)
		}
		return time.Since(t0)
	}
	base := timed()
	if err := srv.Delay(ctx, 2*time.Second); err != nil {
		if errors.Is(err, sandbox.ErrNoNetem) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer func() {
		if err := srv.ClearDelay(ctx); err != nil {
			t.Error(err)
		}
	}()
	slow := timed()
	t.Logf("redis-cli ping (connect + PING) from %s: %v without delay, %v with a 2s delay on %s's link", h.Name, base, slow, srv.Name)
	if extra := slow - base; extra < 1500*time.Millisecond || extra > 15*time.Second {
		t.Errorf("a 2s delay added %v to a redis round trip, want roughly 2-4 s", extra)
	}
}

// bootOnNet boots sandboxes on n at once (the suite lock is this process's
// already) and stops them when the test ends.
func bootOnNet(t *testing.T, ctx context.Context, n *sandbox.Net, names ...string) []*sandbox.Sandbox {
	t.Helper()
	sbs := make([]*sandbox.Sandbox, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := sandbox.Options{Name: fmt.Sprintf("%s-%d", name, os.Getpid()), OwnerPID: os.Getpid(), Network: n}
			sbs[i], errs[i] = sandbox.Start(ctx, opts)
		}()
	}
	wg.Wait()
	for _, sb := range sbs {
		if sb != nil {
			t.Cleanup(func() { _ = sb.Stop(context.Background()) })
		}
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return sbs
}

// hostLinks lists the host's links, leaving out the fq* links that
// another test process's sandbox networks may create meanwhile.
func hostLinks(t *testing.T) string {
	t.Helper()
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "fq") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// netCrashEnv makes the test binary the stand-in owner of
// TestNetSweptWhenOwnerDies, instead of running tests.
const netCrashEnv = "FLEXIQ_SANDBOX_NET_CRASH"

// netCrashHelper creates a net and a sandbox on it, prints the bridge's and
// the veth's names, and waits to be killed.
func netCrashHelper() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := sandbox.CreateNet(ctx, os.Getenv(netCrashEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sb, err := sandbox.Start(ctx, sandbox.Options{Name: fmt.Sprintf("netcrash-%d", os.Getpid()), OwnerPID: os.Getpid(), Network: n})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(n.Bridge, sb.NetLink)
	<-ctx.Done()
	return 1
}

// A test process killed outright (SIGKILL: no cleanup, no t.Cleanup) leaves
// no link behind: the keeper deletes its veth, and the bridge, whose owner
// is dead.
func TestNetSweptWhenOwnerDies(t *testing.T) {
	sandbox.Get(t)
	if why := sandbox.NetUnsupported(); why != "" {
		t.Skip(why)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// The lock is this process's already (sandbox.Main took it); the
	// stand-in inherits that, as the sandbox CLI does.
	cmd.Env = append(os.Environ(), netCrashEnv+"=10.77.1.0/24")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var bridge, veth string
	if _, err := fmt.Fscan(out, &bridge, &veth); err != nil {
		t.Fatalf("the stand-in owner printed no links: %v", err)
	}
	for _, l := range []string{bridge, veth} {
		if _, err := os.Stat("/sys/class/net/" + l); err != nil {
			t.Fatalf("link %s not on the host while its sandbox runs: %v", l, err)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if ok, state := sandbox.Eventually(60*time.Second, func() (bool, string) {
		var left []string
		for _, l := range []string{bridge, veth} {
			if _, err := os.Stat("/sys/class/net/" + l); err == nil {
				left = append(left, l)
			}
		}
		return len(left) == 0, strings.Join(left, " ")
	}); !ok {
		t.Errorf("links left after their owner was killed: %s", state)
	}
}
