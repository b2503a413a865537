package units

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// A service pool's wake address (issue 29): a transient socket unit,
// flexiq-POOL-wake.socket, listens there, and its namesake service,
// flexiq-POOL-wake.service, runs `flexiq-scaled wake POOL` when a
// connection arrives, or when the daemon starts it ahead of one
// (StartWakeProcess) while the pool is at zero (Accept=no: one process
// takes the listening socket, holds the connections while the pool wakes,
// forwards them, and exits once idle with the pool awake, leaving the
// socket to systemd again). The socket is the main
// unit of its StartTransientUnit call and the service an auxiliary one,
// loaded but not started, as systemd-run --socket-property makes them: the
// service stays loaded for as long as the socket refers to it, so that
// every later connection can start it again.
//
// The socket belongs to systemd, not to the daemon: a daemon that restarts
// or crashes leaves it listening, connections queue in its backlog, and
// the next daemon adopts it (EnsureWake finds it active with the same
// definition and leaves it alone).

// WakeSpec is a pool's wake address and the command that serves it.
type WakeSpec struct {
	Pool string
	// Listen is the address (host:port) systemd listens at.
	Listen string
	// Exec is the wake process's command line (the daemon's own binary,
	// `wake POOL` and its flags).
	Exec []string
}

// WakeSocketName and WakeServiceName are the units of pool's wake address.
func WakeSocketName(pool string) string  { return unitPrefix + pool + "-wake.socket" }
func WakeServiceName(pool string) string { return unitPrefix + pool + "-wake.service" }

const wakeDescriptionPrefix = "flexiq-scaled wake address of pool "

// description names the spec whole: a unit found with another was made
// for another configuration, and is made again.
func (s WakeSpec) description() string {
	return wakeDescriptionPrefix + s.Pool + " " + s.Listen + ": " + strings.Join(s.Exec, " ")
}

func (s WakeSpec) properties() (socket, service []sddbus.Property, err error) {
	ap, err := netip.ParseAddrPort(s.Listen)
	if err != nil || ap.Port() == 0 {
		return nil, nil, fmt.Errorf("wake address of pool %s: %q is not an address and port", s.Pool, s.Listen)
	}
	if len(s.Exec) == 0 {
		return nil, nil, fmt.Errorf("wake address of pool %s: no command", s.Pool)
	}
	socket = []sddbus.Property{
		prop("Description", s.description()),
		prop("Listen", []listenEntry{{"Stream", ap.String()}}),
		prop("FileDescriptorName", "wake"),
		// A burst at zero queues here while the holder starts.
		prop("Backlog", uint32(4096)),
		prop("Slice", SliceName(s.Pool)),
	}
	service = []sddbus.Property{
		prop("Description", s.description()),
		sddbus.PropExecStart(literalArgv(s.Exec), false),
		prop("Slice", SliceName(s.Pool)),
		prop("WorkingDirectory", "/"),
		prop("StandardInput", "null"),
		// The holder leaves the socket to systemd when idle; it is
		// stopped (a restart of the daemon is not) with its socket.
		prop("KillMode", "mixed"),
		prop("TimeoutStopUSec", uint64(10_000_000)),
		// It relays untrusted connections: a dynamic user, which the
		// daemon's control.sock knows by this service's cgroup (it may
		// wake this pool and read its replicas, nothing else), with
		// nothing of root's.
		prop("DynamicUser", true),
		prop("NoNewPrivileges", true),
		prop("CapabilityBoundingSet", uint64(0)),
		prop("ProtectSystem", "strict"),
		prop("ProtectHome", "yes"),
		prop("PrivateTmp", true),
		prop("PrivateDevices", true),
		prop("PrivateIPC", true),
		prop("RestrictAddressFamilies", allowList{true, []string{"AF_UNIX", "AF_INET", "AF_INET6"}}),
	}
	service = append(service, protectKernel()...)
	service = append(service,
		prop("RestrictNamespaces", uint64(0)),
		prop("RestrictRealtime", true),
		prop("RestrictSUIDSGID", true),
		prop("LockPersonality", true),
		prop("MemoryDenyWriteExecute", true),
		prop("SystemCallArchitectures", []string{"native"}),
		prop("SystemCallFilter", allowList{true, []string{"@system-service"}}),
		prop("SystemCallErrorNumber", int32(ePERM)),
		prop("UMask", uint32(0o077)),
	)
	return socket, service, nil
}

// EnsureWake makes the pool's wake socket listen as s says: it adopts an
// active socket of the same definition (a restarted daemon's), and
// replaces one of another (a reload that changed the address or the
// flags). It reports whether it started the socket.
func (m *Manager) EnsureWake(ctx context.Context, s WakeSpec) (started bool, err error) {
	sock, svc := WakeSocketName(s.Pool), WakeServiceName(s.Pool)
	sprops, vprops, err := s.properties()
	if err != nil {
		return false, err
	}
	desc, state, err := m.wakeState(ctx, sock)
	if err != nil {
		return false, err
	}
	if state == "active" && desc == s.description() {
		return false, nil
	}
	if state != "" {
		if err := m.StopWake(ctx, s.Pool); err != nil {
			return false, err
		}
	}
	names := []string{sock, svc}
	if err := m.startTransientGroup(ctx, names, sprops, []auxUnit{{svc, vprops}}); err != nil {
		return false, fmt.Errorf("starting %s: %w", sock, err)
	}
	st, err := m.pollUnits(ctx, []string{sock}, "the start job of "+sock, func(u sddbus.UnitStatus) bool { return u.JobId != 0 })
	if err != nil {
		return false, fmt.Errorf("starting %s: %w", sock, err)
	}
	if st[0].ActiveState != "active" {
		_ = m.resetFailed(ctx, sock)
		return false, fmt.Errorf("starting %s listening on %s: it is %s/%s (is the address taken?)", sock, s.Listen, st[0].ActiveState, st[0].SubState)
	}
	return true, nil
}

// StartWakeProcess starts the pool's wake process through its service,
// which systemd hands the socket as it would on a connection. The daemon
// calls it when the pool has no ready replica, so that the first
// connection finds the process up rather than waiting for its start. It
// returns once systemd has queued the start: a process already running is
// left alone, one stopping is started again after its stop.
func (m *Manager) StartWakeProcess(ctx context.Context, pool string) error {
	svc := WakeServiceName(pool)
	err := m.call(ctx, "starting "+svc, func(c *conn) error {
		_, err := c.StartUnitContext(ctx, svc, "replace", nil)
		return err
	})
	if err != nil {
		return fmt.Errorf("starting %s: %w", svc, err)
	}
	return nil
}

// wakeState is the socket's Description and ActiveState; "" and "" when
// it is not loaded.
func (m *Manager) wakeState(ctx context.Context, sock string) (desc, state string, err error) {
	var st []sddbus.UnitStatus
	err = m.call(ctx, "reading "+sock, func(c *conn) error {
		var err error
		st, err = c.ListUnitsByNamesContext(ctx, []string{sock})
		return err
	})
	if err != nil || len(st) == 0 || st[0].LoadState != "loaded" {
		return "", "", err
	}
	return st[0].Description, st[0].ActiveState, nil
}

// StopWake stops the pool's wake socket and its service, if loaded, and
// waits for both; connections held meanwhile are refused.
func (m *Manager) StopWake(ctx context.Context, pool string) error {
	sock, svc := WakeSocketName(pool), WakeServiceName(pool)
	for _, u := range []string{sock, svc} {
		done := make(chan string, 1)
		err := m.call(ctx, "stopping "+u, func(c *conn) error {
			_, err := c.StopUnitContext(ctx, u, "replace", done)
			return err
		})
		if dbusErrorName(err) == errNoSuchUnit {
			continue
		}
		if err != nil {
			return fmt.Errorf("stopping %s: %w", u, err)
		}
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("stopping %s: %w", u, ctx.Err())
		}
		_ = m.resetFailed(ctx, u)
	}
	return nil
}

// WakeStates lists the wake sockets that are loaded, by pool, with their
// ActiveState: what a starting daemon finds of the last one's.
func (m *Manager) WakeStates(ctx context.Context) (map[string]string, error) {
	var st []sddbus.UnitStatus
	err := m.call(ctx, "listing the wake sockets", func(c *conn) error {
		var err error
		st, err = c.ListUnitsByPatternsContext(ctx, nil, []string{unitPrefix + "*-wake.socket"})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, u := range st {
		pool, ok := strings.CutSuffix(strings.TrimPrefix(u.Name, unitPrefix), "-wake.socket")
		if ok && strings.HasPrefix(u.Description, wakeDescriptionPrefix+pool+" ") {
			out[pool] = u.ActiveState
		}
	}
	return out, nil
}
