// Package units is the only part of flexiq-scaled that speaks D-Bus to
// systemd. Workers are transient services, flexiq-<pool>@<slot>.service, in
// the slice flexiq-<pool>.slice; systemd's own unit list is the daemon's
// only record of them, so every listing asks systemd afresh and nothing
// depends on D-Bus signals arriving (job results aside, whose waits are
// bounded by the caller's context). Only the properties of a worker that
// still runs under the same invocation are kept between listings
// (cache.go).
package units

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// Options configure a Manager.
type Options struct {
	// User selects the calling user's service manager instead of the system one.
	User bool
	// Dial overrides how to reach the bus (tests dial the sandbox's): it
	// returns one authenticated connection that has said Hello. It is
	// called twice per connection to systemd (go-systemd keeps calls and
	// signals apart), and again on every reconnect. The context it gets is
	// the Manager's own, ended by Close: godbus ties a connection's life to
	// the context it was dialled with, so it must outlive any single call.
	Dial func(ctx context.Context) (*dbus.Conn, error)
	// CgroupRoot is where unit cgroup paths (ControlGroup) are resolved to
	// read CPU usage. "" detects it from the mount table: the cgroup2 mount
	// (/sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid hosts), and the
	// cgroup v1 cpuacct hierarchy as a fallback.
	CgroupRoot string
	// OpenPIDFD opens a pidfd for a unit's main process, as systemd
	// numbers it (the cache of running workers watches them, cache.go).
	// nil is pidfd_open(2); tests whose systemd lives in another PID
	// namespace map the PID first.
	OpenPIDFD func(pid uint32) (int, error)
}

// Reconnect backoff: quick enough to ride out a daemon-reexec (well under a
// second), slow enough not to spin against a bus that is down for good.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// Manager talks to one systemd instance. It is safe for concurrent use.
// The connection, and riding out restarts of systemd and the bus, is its
// link's (link.go); the Manager's own methods are the unit operations.
type Manager struct {
	link
	cpu cgroupReader
	// running keeps running workers' properties between listings (cache.go).
	running runningCache

	// propertyReads counts the workers whose properties were read, which
	// running's hits spare.
	propertyReads atomic.Int64
}

// Connect dials the service manager and checks that systemd answers. It
// does not retry: a host where systemd cannot be reached at all is better
// reported at startup than hidden behind a backoff loop.
func Connect(ctx context.Context, o Options) (*Manager, error) {
	dial := o.Dial
	if dial == nil {
		bus := dbus.SystemBusPrivate
		if o.User {
			bus = dbus.SessionBusPrivate
		}
		dial = func(ctx context.Context) (*dbus.Conn, error) { return HelloBus(ctx, bus) }
	}
	cpu, err := newCgroupReader(o.CgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("units: %w", err)
	}
	life, cancel := context.WithCancel(context.Background())
	m := &Manager{link: link{dial: dial, life: life, cancel: cancel, redial: make(chan struct{}, 1)}, cpu: cpu}
	m.running.openPIDFD = o.OpenPIDFD
	if m.running.openPIDFD == nil {
		m.running.openPIDFD = func(pid uint32) (int, error) { return unix.PidfdOpen(int(pid), 0) }
	}
	c, err := m.dialOnce(ctx)
	if err == nil {
		err = ping(ctx, c)
		if err != nil {
			c.Close()
		}
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("units: connecting to the service manager: %w", err)
	}
	m.conn = c
	return m, nil
}

// Close closes the connection. Job-result channels still waiting then never
// receive; calls made afterwards fail.
func (m *Manager) Close() {
	if m.link.close() {
		m.running.closeAll()
	}
}

// PropertyReads counts the reads of a worker's whole set of properties that
// listings made: at a steady state, none per listing (cache.go).
func (m *Manager) PropertyReads() int64 { return m.propertyReads.Load() }

var errClosed = errors.New("units: manager closed")

// conn is go-systemd's connection to systemd, with the bus connection that
// it makes its calls on: ListWorkers calls systemd on it directly
// (list.go).
type conn struct {
	*sddbus.Conn
	bus *dbus.Conn
}

// HelloBus opens a private connection to a bus and authenticates as
// go-systemd's own constructors do: EXTERNAL as our UID, then Hello. open is
// dbus.SystemBusPrivate, or a dial of another bus's address (the test
// sandbox's); what it returns is what Options.Dial must.
func HelloBus(ctx context.Context, open func(...dbus.ConnOption) (*dbus.Conn, error)) (*dbus.Conn, error) {
	c, err := open(dbus.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Hello(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// connect makes one connection to systemd. go-systemd dials the bus twice,
// for its calls first and then for its signals; the first is kept.
func connect(ctx context.Context, dial func(context.Context) (*dbus.Conn, error)) (*conn, error) {
	var calls *dbus.Conn
	c, err := sddbus.NewConnection(func() (*dbus.Conn, error) {
		b, err := dial(ctx)
		if err == nil && calls == nil {
			calls = b
		}
		return b, err
	})
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, bus: calls}, nil
}

// ping asks systemd for a trivial property, proving it is on the bus.
func ping(ctx context.Context, c *conn) error {
	_, err := c.SystemStateContext(ctx)
	return err
}

// transient reports whether err means that systemd or the bus is
// (temporarily) unreachable rather than that the request was refused.
func transient(err error, c *conn) bool {
	if !c.Connected() {
		return true
	}
	if errors.Is(err, dbus.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	switch dbusErrorName(err) {
	case "org.freedesktop.DBus.Error.NoReply", // systemd went away mid-call (reexec)
		"org.freedesktop.DBus.Error.ServiceUnknown", // systemd not (yet) back on the bus
		"org.freedesktop.DBus.Error.NameHasNoOwner",
		"org.freedesktop.DBus.Error.Disconnected":
		return true
	}
	return false
}

// dbusErrorName is the D-Bus error name carried by err, or "".
func dbusErrorName(err error) string {
	var v dbus.Error
	if errors.As(err, &v) {
		return v.Name
	}
	var p *dbus.Error
	if errors.As(err, &p) && p != nil {
		return p.Name
	}
	return ""
}
