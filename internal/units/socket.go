package units

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// Socket activation (issue 27, item 1): systemd binds a replica's port in
// a transient socket unit, flexiq-POOL@SLOT.socket, and passes the
// listening socket to the replica (LISTEN_FDS=1, LISTEN_FDNAMES=NAME), so
// that no other program can take the port between its pick and the
// replica's bind, and the port outlives a restart of the daemon.
//
// The socket is an auxiliary unit of the service's StartTransientUnit
// call, as systemd-run --socket-property makes them (src/run/run.c), but
// with the service as the main unit and started at once, not on the first
// connection. systemd 252 refuses Service= on a transient socket, so the
// socket is the service's namesake: that is how it finds the service to
// pass its descriptor to, and why a worker has one socket unit at most.
// The dependencies, each checked against systemd 252 in the sandbox:
//
//   - the service Requires= the socket: the start pulls in the socket,
//     which systemd orders before its service implicitly, so the service
//     starts with the socket listening; a socket that cannot bind (the
//     port is taken) fails the service's start job ("dependency") rather
//     than starting it without its socket;
//   - the socket BindsTo= the service: when the service ends for any
//     reason (a crash, a stop, systemctl stop), the socket stops too,
//     rather than staying to start the service again on the next
//     connection behind the daemon's back.
//
// StopWorker stops the socket first, alone (job mode
// "ignore-dependencies", so that Requires= does not take the service
// down with it, ordered after the service's whole drain): systemd's copy
// of the listening socket is closed before the drain signal, so the port
// refuses connections as soon as the replica closes its own copy, rather
// than queueing connections that nobody accepts until the drain is over.

// SocketSpec is a port that systemd binds for a worker (WorkerSpec.Socket).
type SocketSpec struct {
	// Name is the port's name: the socket's FileDescriptorName=, which the
	// worker reads in LISTEN_FDNAMES.
	Name string
	// Address and Port are what the socket listens on (ListenStream=).
	Address string
	Port    int
}

// fdNameRE is what this package hands systemd as a FileDescriptorName=:
// the config's port names, a subset of systemd's fdname_is_valid.
var fdNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// SocketName is the socket unit of the worker in slot of pool: the
// namesake of its service, UnitName(pool, slot).
func SocketName(pool string, slot int) string {
	return unitPrefix + pool + "@" + strconv.Itoa(slot) + ".socket"
}

// listenAddress is ListenStream='s value: ADDRESS:PORT, [ADDRESS]:PORT
// for IPv6.
func (s SocketSpec) listenAddress() (string, error) {
	ip, err := netip.ParseAddr(s.Address)
	switch {
	case err != nil || ip.Zone() != "":
		return "", fmt.Errorf("socket %s: address %q is not an IP address without a zone", s.Name, s.Address)
	case s.Port < 1 || s.Port > 65535:
		return "", fmt.Errorf("socket %s: %d is not a port number", s.Name, s.Port)
	case !fdNameRE.MatchString(s.Name):
		return "", fmt.Errorf("socket %q: not a port name ([a-z][a-z0-9_]{0,31})", s.Name)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(s.Port)), nil
}

// listenEntry is one entry of a socket's Listen property, D-Bus (ss): the
// type ("Stream" for ListenStream=) and the address.
type listenEntry struct {
	Type, Address string
}

// socketProperties is the socket unit's definition.
func (s WorkerSpec) socketProperties() ([]sddbus.Property, error) {
	addr, err := s.Socket.listenAddress()
	if err != nil {
		return nil, err
	}
	return []sddbus.Property{
		prop("Description", socketDescriptionPrefix+s.Pool+"/"+strconv.Itoa(s.Slot)+" "+s.Socket.Name+" "+addr),
		prop("Listen", []listenEntry{{"Stream", addr}}),
		prop("FileDescriptorName", s.Socket.Name),
		prop("BindsTo", []string{UnitName(s.Pool, s.Slot)}),
		// With its pool, not in system.slice: systemd binds the port
		// in a helper forked into the socket's cgroup, which is then
		// where the listener's cgroup id points (internal/portowner).
		prop("Slice", SliceName(s.Pool)),
	}, nil
}

const socketDescriptionPrefix = "flexiq-scaled socket "

// socketServiceProperties are what the service of a worker with a socket
// adds to its definition.
func (s WorkerSpec) socketServiceProperties() []sddbus.Property {
	if s.Socket == nil {
		return nil
	}
	return []sddbus.Property{prop("Requires", []string{SocketName(s.Pool, s.Slot)})}
}

// startSocketed starts the worker's service and socket in one transaction
// and waits for the socket's start job, then (unless s.NotifyReady) for
// the service's. A socket that did not bind fails the start, with the
// socket's Result, and is reset so that nothing of it stays loaded.
func (m *Manager) startSocketed(ctx context.Context, s WorkerSpec) error {
	unit, sock := UnitName(s.Pool, s.Slot), SocketName(s.Pool, s.Slot)
	props, err := s.Properties()
	if err != nil {
		return fmt.Errorf("starting %s: %w", unit, err)
	}
	sprops, err := s.socketProperties()
	if err != nil {
		return fmt.Errorf("starting %s: %w", unit, err)
	}
	names := []string{unit, sock}
	if err := m.startTransientGroup(ctx, names, props, []auxUnit{{sock, sprops}}); err != nil {
		return err
	}
	hasJob := func(u sddbus.UnitStatus) bool { return u.JobId != 0 }
	st, err := m.pollUnits(ctx, []string{sock}, "the start job of "+sock, hasJob)
	if err != nil {
		m.stopGroup(ctx, names)
		return fmt.Errorf("starting %s: %w", unit, err)
	}
	if st[0].LoadState != "loaded" || st[0].ActiveState != "active" {
		return m.socketFailure(ctx, s, unit, sock)
	}
	if s.NotifyReady {
		return m.awaitJobRunning(ctx, []string{unit})
	}
	st, err = m.pollUnits(ctx, []string{unit}, "the start job of "+unit, hasJob)
	switch {
	case err != nil:
		m.stopGroup(ctx, names)
		return fmt.Errorf("starting %s: %w", unit, err)
	case st[0].LoadState == "loaded" && st[0].ActiveState == "active":
		return m.afterStart(ctx, s, unit)
	case len(s.StartCondition) > 0 && st[0].ActiveState != "failed":
		return fmt.Errorf("starting %s: %w (ExecCondition %q)", unit, ErrConditionSkipped, s.StartCondition)
	}
	return m.startFailure(ctx, unit, "failed")
}

// ErrSocketFailed is wrapped by StartWorker's error when systemd could not
// bind a worker's socket: most often the port is taken. It is a failed
// start of the slot, like any other.
var ErrSocketFailed = errors.New("the socket did not start")

// socketFailure explains and clears a socket that did not start: its
// service's start job failed with it ("dependency"). The failed socket is
// reset, since systemd would keep it loaded, and its name taken, until then.
func (m *Manager) socketFailure(ctx context.Context, s WorkerSpec, unit, sock string) error {
	result := "unknown"
	var p map[string]any
	err := m.call(ctx, "reading "+sock, func(c *conn) error {
		var err error
		p, err = c.GetUnitTypePropertiesContext(ctx, sock, "Socket")
		return err
	})
	if err == nil {
		if r, _ := p["Result"].(string); r != "" {
			result = r
		}
	}
	m.stopGroup(ctx, []string{unit})
	_ = m.resetFailed(ctx, sock)
	addr, _ := s.Socket.listenAddress()
	why := ""
	if result == "resources" {
		why = " (systemd could not bind it: is the port taken?)"
	}
	return fmt.Errorf("starting %s: %w: %s listening on %s: result %s%s", unit, ErrSocketFailed, sock, addr, result, why)
}

// stopSocket stops the socket of the worker unit, if it has one, alone
// (see the top of this file), and waits for that stop, which is at once:
// a socket unit runs no commands of ours. A unit of no socket costs one
// GetUnit call, which loads nothing.
func (m *Manager) stopSocket(ctx context.Context, unit string) error {
	pool, slot, ok := ParseUnitName(unit)
	if !ok {
		return nil
	}
	sock := SocketName(pool, slot)
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	err := m.call(ctx, "looking up "+sock, func(c *conn) error {
		return c.bus.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1").CallWithContext(ctx,
			"org.freedesktop.systemd1.Manager.GetUnit", 0, sock).Err
	})
	if dbusErrorName(err) == errNoSuchUnit {
		return nil
	}
	if err != nil {
		return err
	}
	done := make(chan string, 1)
	err = m.call(ctx, "stopping "+sock, func(c *conn) error {
		_, err := c.StopUnitContext(ctx, sock, "ignore-dependencies", done)
		return err
	})
	if err != nil {
		if dbusErrorName(err) == errNoSuchUnit {
			return nil
		}
		return err
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping %s: %w", sock, ctx.Err())
	}
}
