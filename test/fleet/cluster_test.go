package fleet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/test/harness"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
	"github.com/flexiq/flexiq-scaled/test/servers"
)

const (
	daemonUnit = harness.DaemonUnit
	// netCIDR is the fleet's bridge; no other suite uses it.
	netCIDR = "10.77.20.0/24"
	// pgUser is the PostgreSQL role and database of both the River jobs
	// and the fleet's table; pgPassword its password.
	pgUser     = "fleet"
	pgPassword = "fleet-pw"
	// pgPasswordFile is where each host keeps pgPassword for the daemon.
	pgPasswordFile = "/etc/flexiq-scaled/pg.password"
)

// host is one of the fleet's hosts: a sandbox running flexiq-scaled.
type host struct {
	name string
	sb   *sandbox.Sandbox
	env  *harness.Env
	// id is its /etc/machine-id, the daemon's host id in the fleet.
	id string
	// capacity is what its config gives each pool ([pools.NAME.fleet]).
	capacity int
	ctl      *control.Client
	// gone is set once the host is powered off (the host-loss scenario).
	gone bool
}

// cluster is the whole layout: the server sandbox and the hosts.
type cluster struct {
	t     *testing.T
	net   *sandbox.Net
	srv   *sandbox.Sandbox
	hosts []*host
	// redisURL and pgURL are the servers as the hosts reach them (pgURL
	// without the password).
	redisURL, pgURL string
	stores          *stores
	rec             *recorder
	// fig holds each pool's FIGURE lines, logged together at the end.
	fig map[string][]string
}

// capacities are the hosts' capacities, the same for both pools: 26 in all,
// above the fleet's target of 20, but not once a host of 10 is lost.
var capacities = []int{10, 10, 6}

// boot creates the bridge and boots the four sandboxes at once, starts the
// servers and installs the daemon on the hosts (not started).
func boot(t *testing.T) *cluster {
	t.Helper()
	n := sandbox.NewNet(t, "fleet", netCIDR)
	names := []string{"srv", "h1", "h2", "h3"}
	opts := make([]sandbox.Options, len(names))
	for i, name := range names {
		opts[i] = sandbox.Options{
			Name:        fmt.Sprintf("fleet-%s-%d", name, os.Getpid()),
			Network:     n,
			StopTimeout: 10 * time.Second,
		}
	}
	t0 := time.Now()
	sbs := harness.BootAll(t, 4*time.Minute, opts...)
	c := &cluster{t: t, net: n, srv: sbs[0]}
	// Registered after BootAll's, so it runs before the sandboxes stop.
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpJournals()
		}
	})
	t.Logf("4 sandboxes booted in %.1fs", time.Since(t0).Seconds())
	for i, sb := range sbs[1:] {
		c.hosts = append(c.hosts, &host{name: names[i+1], sb: sb, env: &harness.Env{T: t, SB: sb}, capacity: capacities[i],
			ctl: &control.Client{Socket: fmt.Sprintf("/proc/%d/root/run/flexiq-scaled/%s", sb.PID, control.SocketName), Timeout: time.Second}})
	}
	c.checkMachineIDs()

	c.redisURL = servers.RedisOn(t, c.srv)
	c.pgURL = servers.PostgresOn(t, c.srv, pgUser, pgPassword)
	for _, h := range c.hosts {
		c.install(h)
	}
	c.redisURL += "/0"
	t.Logf("servers: %s, %s", c.redisURL, c.pgURL)
	c.stores = openStores(t, c.srv, c.pgURL)
	return c
}

// checkMachineIDs reads each sandbox's /etc/machine-id (the daemon's host
// id) and checks that they differ: the fleet would see one host otherwise.
func (c *cluster) checkMachineIDs() {
	c.t.Helper()
	seen := map[string]string{}
	for _, sb := range append([]*sandbox.Sandbox{c.srv}, c.sandboxes()...) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/machine-id", sb.PID))
		if err != nil {
			c.t.Fatal(err)
		}
		id := strings.TrimSpace(string(b))
		if len(id) != 32 {
			c.t.Fatalf("sandbox %s: machine-id %q", sb.Name, id)
		}
		if other, dup := seen[id]; dup {
			c.t.Fatalf("sandboxes %s and %s share the machine-id %s", other, sb.Name, id)
		}
		seen[id] = sb.Name
		for _, h := range c.hosts {
			if h.sb == sb {
				h.id = id
			}
		}
	}
}

func (c *cluster) sandboxes() []*sandbox.Sandbox {
	var sbs []*sandbox.Sandbox
	for _, h := range c.hosts {
		sbs = append(sbs, h.sb)
	}
	return sbs
}

// install puts the daemon, its unit and a test drop-in on a host, as a
// package would, and checks that the host reaches both servers.
func (c *cluster) install(h *host) {
	c.t.Helper()
	harness.InstallDaemon(c.t, h.sb, harness.Daemon{
		BinDir: binDir,
		// The watchdog must outlast the paused-leader scenario's SIGSTOP
		// (9 s); a quick restart keeps the SIGKILL scenario short.
		DropIn: "WatchdogSec=30s\nRestartSec=500ms\n",
	})
	h.env.Write(pgPasswordFile, pgPassword)
	h.env.Sh("chmod 0600 " + pgPasswordFile)
}

// reachServers checks, from every host, that the servers answer on the
// bridge, as the daemon and the sources will reach them.
func (c *cluster) reachServers() {
	c.t.Helper()
	ip := c.srv.IP().String()
	for _, h := range c.hosts {
		if out, err := harness.Exec(h.sb, 10*time.Second, "redis-cli", "-h", ip, "ping"); err != nil || strings.TrimSpace(out) != "PONG" {
			c.t.Fatalf("host %s cannot reach the Redis at %s: %v %s", h.name, ip, err, out)
		}
		out, err := harness.Exec(h.sb, 10*time.Second, "env", "PGPASSWORD="+pgPassword, "psql", "-X", "-A", "-t", "-h", ip, "-U", pgUser, "-d", pgUser, "-c", "SELECT 40+2")
		if err != nil || strings.TrimSpace(out) != "42" {
			c.t.Fatalf("host %s cannot reach the PostgreSQL at %s: %v %s", h.name, ip, err, out)
		}
	}
}

// configure writes each host's config.toml.
func (c *cluster) configure(fleet bool) {
	c.t.Helper()
	for _, h := range c.hosts {
		h.env.Configure(configTOML(c, h, fleet))
	}
}

// startDaemons starts flexiq-scaled on every host at once.
func (c *cluster) startDaemons() {
	c.t.Helper()
	c.onHosts(c.hosts, "systemctl", "start", daemonUnit)
}

// onHosts runs argv on the hosts at once and fails the test if any fails.
func (c *cluster) onHosts(hosts []*host, argv ...string) {
	c.t.Helper()
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = harness.Exec(h.sb, 2*time.Minute, argv...)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.t.Fatal(err)
		}
	}
}

// mainPID is the daemon's MainPID inside its host (0 when not running).
func (h *host) mainPID() (int, error) {
	out, err := harness.Exec(h.sb, 30*time.Second, "systemctl", "show", "-p", "MainPID", "--value", daemonUnit)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// byID finds the host of a fleet host id ("" and unknown ids: nil).
func (c *cluster) byID(id string) *host {
	for _, h := range c.hosts {
		if id != "" && h.id == id {
			return h
		}
	}
	return nil
}

// dumpJournals logs the end of every host's daemon journal, for a failure.
func (c *cluster) dumpJournals() {
	for _, h := range c.hosts {
		if h.gone {
			continue
		}
		out := harness.Journal(h.sb, "-n", "60", "-u", daemonUnit)
		c.t.Logf("journal of %s (%s):\n%s", h.name, h.id, out)
	}
}

// npmCI installs BullMQ's client from its lock file, once per checkout.
func npmCI(t *testing.T) {
	t.Helper()
	root, _ := sandbox.ModuleRoot()
	dir := filepath.Join(root, "test", "clients", "bullmq")
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err == nil {
		return
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
}
