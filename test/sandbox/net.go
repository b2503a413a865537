package sandbox

// Networks of sandboxes, for issue 20's fleet tests ("Tests: real hosts on
// one machine"): several sandboxes, each a real systemd in the network
// namespace its keeper already creates (CLONE_NEWNET, loopback only), joined
// by a Linux bridge on the host. Each sandbox gets a veth pair: one end,
// renamed fleet0, inside its namespace with an address from the net's
// prefix; the other on the bridge. Neither the bridge nor the host-side
// veths have an address (IPv6 link-local generation is off too), and no
// sandbox has a route beyond its prefix: the sandboxes reach each other and
// nothing else, not even the host. No NAT, no forwarding, no sysctl: bridged
// frames never go through the host's IP stack.
//
// On the host this runs only iproute2 commands on links it created itself:
// ip link add/set/del of its bridge and veths, ip addr/link inside the
// sandboxes' namespaces through nsenter -n, and tc qdisc on its own veths.
// Every link it creates carries an alias naming its owner (the test process
// for a bridge, the keeper for a veth) so that a sweep can delete the links
// of owners that died: the keeper sweeps when it cleans up, and so does
// Main when a test binary starts. A veth also dies with the sandbox's
// namespace.
//
// Still to wire for issue 20: the fleet test harness (three hosts and a
// server sandbox, test/servers.RedisOn/PostgresOn) that starts flexiq-scaled
// daemons in these sandboxes.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// InsideLink is the name of a sandbox's end of its veth pair.
const InsideLink = "fleet0"

// aliasPrefix marks the links this package creates; the rest of the alias
// names the owner as "owner=PID:STARTTIME".
const aliasPrefix = "flexiq-sandbox "

// ErrNoNetem says a link cannot be delayed here: the kernel has no netem
// qdisc (CONFIG_NET_SCH_NETEM), and no NFQUEUE either (CONFIG_NETFILTER_
// XT_TARGET_NFQUEUE, or the iptables command, missing).
var ErrNoNetem = errors.New("the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM unset or module missing) and no NFQUEUE: link delay cannot be simulated")

// Net is a bridge that joins sandboxes; set it as Options.Network.
type Net struct {
	// Bridge is the bridge's name on the host.
	Bridge string
	// Prefix is the net's address range; sandboxes take addresses from it
	// in order, from the first host address.
	Prefix netip.Prefix

	mu   sync.Mutex
	last netip.Addr
}

// netLink is what the keeper needs to give its sandbox a link on a Net.
type netLink struct {
	Bridge string       `json:"bridge"`
	Host   string       `json:"host"` // the bridge-side veth
	Addr   netip.Prefix `json:"addr"` // the sandbox's address, with the net's length
}

// NetUnsupported says why sandbox networks cannot run here, or "" if they can.
func NetUnsupported() string {
	if why := Unsupported(); why != "" {
		return why
	}
	for _, bin := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Sprintf("sandbox networks need %s (Debian package iproute2): %v", bin, err)
		}
	}
	return ""
}

// NewNet creates a bridge for the test's sandboxes on cidr (e.g.
// "10.77.0.0/24") and deletes it when the test ends; it skips the test
// when sandbox networks cannot run here. name is for the test's own
// messages only: the bridge's name is unique on the host.
func NewNet(t testing.TB, name, cidr string) *Net {
	t.Helper()
	if why := NetUnsupported(); why != "" {
		t.Skip("sandbox network skipped: " + why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := CreateNet(ctx, cidr)
	if err != nil {
		t.Fatalf("net %s: %v", name, err)
	}
	t.Logf("net %s: bridge %s on %s", name, n.Bridge, n.Prefix)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Errorf("net %s: %v", name, err)
		}
	})
	return n
}

// CreateNet creates the bridge of a new Net on cidr, owned by this process:
// if it dies before Close, the next sweep deletes the bridge. cidr must be
// an IPv4 prefix that no host route or address overlaps.
func CreateNet(ctx context.Context, cidr string) (*Net, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() || p.Bits() > 29 {
		return nil, fmt.Errorf("net prefix %q: want an IPv4 prefix such as 10.77.0.0/24 (%v)", cidr, err)
	}
	p = p.Masked()
	if err := checkNoOverlap(ctx, p); err != nil {
		return nil, err
	}
	n := &Net{Bridge: "fqbr" + randHex(4), Prefix: p, last: p.Addr()}
	owner, err := ownerTag(os.Getpid())
	if err != nil {
		return nil, err
	}
	// addrgenmode none: no IPv6 link-local either, so the host has no
	// address on the net at all.
	steps := [][]string{
		{"link", "add", n.Bridge, "type", "bridge"},
		{"link", "set", n.Bridge, "alias", owner},
		{"link", "set", n.Bridge, "addrgenmode", "none"},
		{"link", "set", n.Bridge, "up"},
	}
	for i, s := range steps {
		if err := ipCmd(ctx, s...); err != nil {
			if i > 0 {
				_ = ipCmd(context.WithoutCancel(ctx), "link", "del", n.Bridge)
			}
			return nil, err
		}
	}
	return n, nil
}

// Close deletes the bridge. Links still on it are detached, not deleted:
// they belong to sandboxes, whose keepers delete them.
func (n *Net) Close(ctx context.Context) error {
	if !linkExists(n.Bridge) {
		return nil
	}
	return ipCmd(ctx, "link", "del", n.Bridge)
}

// take allocates the next address of the net for a sandbox.
func (n *Net) take() (netip.Prefix, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	next := n.last.Next()
	// The last address of the prefix is its broadcast address.
	if !n.Prefix.Contains(next) || !n.Prefix.Contains(next.Next()) {
		return netip.Prefix{}, fmt.Errorf("net %s: no address left", n.Prefix)
	}
	n.last = next
	return netip.PrefixFrom(next, n.Prefix.Bits()), nil
}

// newLink prepares a sandbox's link on n, to be made by its keeper.
func (n *Net) newLink() (*netLink, error) {
	addr, err := n.take()
	if err != nil {
		return nil, err
	}
	return &netLink{Bridge: n.Bridge, Host: "fqv" + randHex(4), Addr: addr}, nil
}

// attach creates the veth pair, puts the host end on the bridge and the
// other, addressed and up, into the namespace of pid (the sandbox's init,
// before systemd starts, so that its services see the address at boot).
// keeper is the veth's owner for sweeps.
func (l *netLink) attach(pid, keeper int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner, err := ownerTag(keeper)
	if err != nil {
		return err
	}
	peer := "fqp" + strings.TrimPrefix(l.Host, "fqv")
	ns := []string{"nsenter", "-t", strconv.Itoa(pid), "-n", "ip"}
	steps := [][]string{
		{"ip", "link", "add", l.Host, "type", "veth", "peer", "name", peer},
		{"ip", "link", "set", l.Host, "alias", owner},
		{"ip", "link", "set", l.Host, "addrgenmode", "none"},
		{"ip", "link", "set", l.Host, "master", l.Bridge},
		{"ip", "link", "set", peer, "netns", strconv.Itoa(pid)},
		append(ns, "link", "set", peer, "name", InsideLink),
		append(ns, "addr", "add", l.Addr.String(), "dev", InsideLink),
		append(ns, "link", "set", InsideLink, "up"),
		append(ns, "link", "set", "lo", "up"),
		{"ip", "link", "set", l.Host, "up"},
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			return fmt.Errorf("link %s on %s: %w", l.Host, l.Bridge, err)
		}
	}
	return nil
}

// detach deletes the host end, and with it the pair, if the sandbox's
// namespace has not already taken it along.
func (l *netLink) detach(ctx context.Context) error {
	if !linkExists(l.Host) {
		return nil
	}
	if err := ipCmd(ctx, "link", "del", l.Host); err != nil && linkExists(l.Host) {
		return err
	}
	return nil
}

// IP returns the sandbox's address on its net, or the zero Addr if it has none.
func (s *Sandbox) IP() netip.Addr { return s.NetAddr.Addr() }

// LinkDown cuts the sandbox off its net: its bridge-side veth goes down,
// so frames neither leave nor reach it, as when a cable is pulled.
func (s *Sandbox) LinkDown(ctx context.Context) error { return s.setLink(ctx, "down") }

// LinkUp reconnects the sandbox after LinkDown.
func (s *Sandbox) LinkUp(ctx context.Context) error { return s.setLink(ctx, "up") }

func (s *Sandbox) setLink(ctx context.Context, state string) error {
	if s.NetLink == "" {
		return fmt.Errorf("sandbox %s has no network", s.Name)
	}
	return ipCmd(ctx, "link", "set", s.NetLink, state)
}

// Delay makes the net deliver every packet to the sandbox d late, so a
// round trip with it grows by d: netem on its bridge-side veth where the
// kernel has netem, else an NFQUEUE in the sandbox's namespace that this
// process releases packets from d late (netdelay.go). It returns an error
// wrapping ErrNoNetem when neither works here.
func (s *Sandbox) Delay(ctx context.Context, d time.Duration) error {
	if s.NetLink == "" {
		return fmt.Errorf("sandbox %s has no network", s.Name)
	}
	if s.delay != nil {
		return fmt.Errorf("sandbox %s: its link is delayed already", s.Name)
	}
	ms := strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	err := run(ctx, "tc", "qdisc", "replace", "dev", s.NetLink, "root", "netem", "delay", ms)
	if err == nil || !(strings.Contains(err.Error(), "Unknown qdisc") || strings.Contains(err.Error(), "qdisc kind is unknown")) {
		return err
	}
	l, qerr := s.startQueueDelay(ctx, d)
	if errors.Is(qerr, errNoQueue) {
		return fmt.Errorf("sandbox %s: %w (%v; %v)", s.Name, ErrNoNetem, err, qerr)
	}
	if qerr != nil {
		return fmt.Errorf("sandbox %s: delaying its link: %w", s.Name, qerr)
	}
	s.delay = l
	return nil
}

// ClearDelay removes a Delay.
func (s *Sandbox) ClearDelay(ctx context.Context) error {
	if s.NetLink == "" {
		return fmt.Errorf("sandbox %s has no network", s.Name)
	}
	if l := s.delay; l != nil {
		s.delay = nil
		return l.stop(ctx, s)
	}
	return run(ctx, "tc", "qdisc", "del", "dev", s.NetLink, "root")
}

// sweepLinks deletes the links this package created whose owner is dead:
// a test binary killed before its Net was closed, a keeper killed before
// it deleted its veth. Only links named fq* with our alias are looked at.
func sweepLinks(ctx context.Context) {
	ents, _ := os.ReadDir("/sys/class/net")
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "fq") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/sys/class/net", name, "ifalias"))
		if err != nil {
			continue
		}
		pid, start, ok := parseOwner(strings.TrimSpace(string(b)))
		if ok && !alive(pid, start) {
			_ = ipCmd(ctx, "link", "del", name)
		}
	}
}

// ownerTag is the alias that names pid, with its start time, as a link's owner.
func ownerTag(pid int) (string, error) {
	st, err := startTime(pid)
	if err != nil {
		return "", fmt.Errorf("owner %d: %w", pid, err)
	}
	return fmt.Sprintf("%sowner=%d:%d", aliasPrefix, pid, st), nil
}

func parseOwner(alias string) (pid int, start uint64, ok bool) {
	rest, ok := strings.CutPrefix(alias, aliasPrefix+"owner=")
	if !ok {
		return 0, 0, false
	}
	p, s, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(s, 10, 64)
	return pid, start, err1 == nil && err2 == nil && pid > 0
}

// checkNoOverlap refuses a prefix that a host address or route (other than
// a default route) overlaps: the sandboxes would shadow part of the host's
// network for nobody, and a test would mean something else.
func checkNoOverlap(ctx context.Context, p netip.Prefix) error {
	var out bytes.Buffer
	for _, args := range [][]string{{"-4", "route", "show", "table", "all"}, {"-4", "-o", "addr", "show"}} {
		cmd := exec.CommandContext(ctx, "ip", args...)
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
		}
	}
	for _, f := range strings.Fields(out.String()) {
		q, err := netip.ParsePrefix(f)
		if err != nil {
			if a, err := netip.ParseAddr(f); err == nil && a.Is4() {
				q = netip.PrefixFrom(a, 32)
			} else {
				continue
			}
		}
		if q.Bits() > 0 && q.Overlaps(p) {
			return fmt.Errorf("net prefix %s overlaps %s on the host; pick another", p, q)
		}
	}
	return nil
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

func ipCmd(ctx context.Context, args ...string) error {
	return run(ctx, append([]string{"ip"}, args...)...)
}

// run runs a host command; its error carries the command and its output.
func run(ctx context.Context, argv ...string) error {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
