// Package sandbox boots the distro's own systemd as PID 1 of fresh
// namespaces, on an overlay of the host's root filesystem, so that tests can
// drive a real service manager (transient units, D-Bus, cgroups, the journal,
// dpkg) without touching the host.
//
// A sandbox is owned by a small keeper process. The keeper creates the
// sandbox's child cgroup, launches the namespaced init, waits for boot, and
// stays behind as its parent: when asked to stop, or when the process that
// owns the sandbox dies (a failed, panicking, timed-out or interrupted test
// binary), it powers systemd off, and then removes the cgroup and the state
// directory. Everything written inside the sandbox lives on a tmpfs in the
// sandbox's private mount namespace and disappears with it.
//
// Each sandbox has its own network namespace with a loopback only, unless
// Options.Network joins it to a Net: a bridge on the host that links
// sandboxes to each other and to nothing else (net.go; issue 20's fleet
// tests).
package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"github.com/prometheus/procfs"

	"github.com/flexiq/flexiq-scaled/internal/units"
)

// StateRoot holds one directory per sandbox, named after it.
const StateRoot = "/run/flexiq-sandbox"

// Options describe a sandbox to start.
type Options struct {
	// Name is [a-z0-9-]{1,32}; several sandboxes run at once under different names.
	Name string
	// Binds are host directories mounted read-write inside, as "HOST" (at the
	// same path, typically the project's checkout) or "HOST:INSIDE".
	// Everything else is copy-on-write. A queue database belongs in a bind
	// at a path such as /var/lib/...: a service's PrivateTmp= or
	// ProtectHome= hides a checkout under /tmp or /home.
	Binds []string
	// OwnerPID, when set, ties the sandbox's life to that process: the keeper
	// stops the sandbox as soon as it exits, however it exits.
	OwnerPID int
	// BootTimeout bounds the wait for `systemctl is-system-running --wait`.
	BootTimeout time.Duration
	// StopTimeout bounds a clean poweroff before the keeper SIGKILLs the
	// sandbox's PID 1, which takes every process of the namespace with it.
	StopTimeout time.Duration
	// Network, when set, joins the sandbox to that Net: its own network
	// namespace gets a link (InsideLink) with the next address of the net,
	// before systemd starts. Without it, the namespace has a loopback only.
	Network *Net `json:"-"`
}

// keeperSpec is what Start hands the keeper.
type keeperSpec struct {
	Options
	Link *netLink `json:"link,omitempty"`
}

// Sandbox is a running sandbox as the host sees it.
type Sandbox struct {
	Name string `json:"name"`
	// PID is the sandbox's systemd (PID 1 inside) as the host sees it.
	PID int `json:"pid"`
	// StartTime is PID's start time in clock ticks, guarding against PID reuse.
	StartTime uint64 `json:"start_time"`
	// KeeperPID is the process that owns the sandbox.
	KeeperPID       int    `json:"keeper_pid"`
	KeeperStartTime uint64 `json:"keeper_start_time"`
	OwnerPID        int    `json:"owner_pid,omitempty"`
	// BusAddress is the sandbox's system bus, reachable from the host.
	BusAddress string `json:"bus_address"`
	// SystemState is what `systemctl is-system-running` said after boot.
	SystemState string `json:"system_state"`
	// FailedUnits lists failed units when SystemState is "degraded".
	FailedUnits []string `json:"failed_units,omitempty"`
	// Cgroup is the host path of the sandbox's own child cgroup.
	Cgroup string `json:"cgroup"`
	// NetAddr is the sandbox's address on its Net, with the net's length;
	// NetLink is the bridge-side end of its veth pair, on the host. Both
	// are zero without Options.Network.
	NetAddr netip.Prefix `json:"net_addr"`
	NetLink string       `json:"net_link,omitempty"`
	// delay is the NFQUEUE that delays the link, when Delay made one.
	delay *linkDelay
}

var nameRE = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

func stateDir(name string) string   { return filepath.Join(StateRoot, name) }
func stateFile(name string) string  { return filepath.Join(stateDir(name), "state.json") }
func keeperLog(name string) string  { return filepath.Join(stateDir(name), "keeper.log") }
func consoleLog(name string) string { return filepath.Join(stateDir(name), "console.log") }

// Unsupported says why sandboxes cannot run on this machine, or "" if they can.
func Unsupported() string {
	if os.Geteuid() != 0 {
		return "the systemd sandbox needs root (namespaces, mounts and a cgroup of its own)"
	}
	fs, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return "the systemd sandbox needs Linux with /proc: " + err.Error()
	}
	if !bytes.Contains(fs, []byte("\toverlay\n")) {
		// The module may simply not be loaded yet.
		_ = exec.Command("modprobe", "overlay").Run()
		if fs, _ = os.ReadFile("/proc/filesystems"); !bytes.Contains(fs, []byte("\toverlay\n")) {
			return "the systemd sandbox needs overlayfs (modprobe overlay failed)"
		}
	}
	if _, err := findCgroup2(); err != nil {
		return "the systemd sandbox needs a cgroup2 hierarchy: " + err.Error()
	}
	for _, bin := range []string{systemdBinary, "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Sprintf("the systemd sandbox needs %s: %v", bin, err)
		}
	}
	return ""
}

// Start boots a sandbox and returns once systemd reports running or degraded.
func Start(ctx context.Context, opts Options) (*Sandbox, error) {
	if !nameRE.MatchString(opts.Name) {
		return nil, fmt.Errorf("sandbox name %q: want [a-z0-9-]{1,32}", opts.Name)
	}
	if why := Unsupported(); why != "" {
		return nil, errors.New(why)
	}
	if opts.BootTimeout == 0 {
		opts.BootTimeout = 90 * time.Second
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = 20 * time.Second
	}
	ctx, cancelLock, lock, err := afterSuiteLock(ctx)
	defer cancelLock()
	if err != nil {
		return nil, err
	}
	if err := clearStale(ctx, opts.Name); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(stateDir(opts.Name), 0o700); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", opts.Name, err)
	}

	// The keeper reports boot success or failure on this pipe, then keeps
	// running on its own, detached from our session so that a Ctrl-C meant
	// for the test run reaches it only through the owner's death.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	keeper, err := launchKeeper(opts, lock, w)
	if err != nil {
		return nil, err
	}
	return awaitKeeper(ctx, opts.Name, keeper, r)
}

// launchKeeper starts the keeper in a session of its own, its output to the
// keeper's log, with w, the readiness pipe, as fd 3 and the suite lock as
// fd 4. It closes w, which from then on only the keeper holds.
func launchKeeper(opts Options, lock, w *os.File) (*exec.Cmd, error) {
	defer w.Close()
	logf, err := os.OpenFile(keeperLog(opts.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	kspec := keeperSpec{Options: opts}
	if opts.Network != nil {
		if kspec.Link, err = opts.Network.newLink(); err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", opts.Name, err)
		}
	}
	spec, _ := json.Marshal(kspec)
	keeper, err := selfCommand(stageKeeper, spec)
	if err != nil {
		return nil, err
	}
	keeper.Stdout, keeper.Stderr = logf, logf
	// fd 3 is the readiness pipe; fd 4 keeps the suite lock held for as
	// long as the keeper lives.
	keeper.ExtraFiles = []*os.File{w}
	if lock != nil { // nil in a process that the holder started
		keeper.ExtraFiles = append(keeper.ExtraFiles, lock)
	}
	keeper.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := keeper.Start(); err != nil {
		return nil, fmt.Errorf("sandbox %s: starting keeper: %w", opts.Name, err)
	}
	// Reap the keeper if it dies while we are its parent; otherwise it is
	// reparented and reaped by whoever is init.
	go keeper.Wait() //nolint:errcheck
	return keeper, nil
}

// awaitKeeper reads the keeper's report on r: the booted sandbox, or why
// it did not boot. If ctx ends first, the keeper is told to stop.
func awaitKeeper(ctx context.Context, name string, keeper *exec.Cmd, r *os.File) (*Sandbox, error) {
	type result struct {
		sb  *Sandbox
		err error
	}
	done := make(chan result, 1)
	go func() {
		var rep report
		if err := json.NewDecoder(r).Decode(&rep); err != nil {
			done <- result{err: fmt.Errorf("sandbox %s: keeper exited before reporting (%v); see %s", name, err, keeperLog(name))}
			return
		}
		if rep.Error != "" {
			done <- result{err: fmt.Errorf("sandbox %s: %s", name, rep.Error)}
			return
		}
		done <- result{sb: rep.Sandbox}
	}()
	select {
	case res := <-done:
		return res.sb, res.err
	case <-ctx.Done():
		_ = keeper.Process.Signal(syscall.SIGTERM)
		return nil, fmt.Errorf("sandbox %s: start: %w", name, ctx.Err())
	}
}

// report is what the keeper sends back on the readiness pipe.
type report struct {
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// Attach returns the running sandbox NAME.
func Attach(name string) (*Sandbox, error) {
	b, err := os.ReadFile(stateFile(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sandbox %s is not running", name)
	}
	if err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := json.Unmarshal(b, &sb); err != nil {
		return nil, fmt.Errorf("sandbox %s: corrupt %s: %w", name, stateFile(name), err)
	}
	if !alive(sb.PID, sb.StartTime) {
		return nil, fmt.Errorf("sandbox %s: its systemd (pid %d) is gone", name, sb.PID)
	}
	return &sb, nil
}

// Stop powers the sandbox off and waits until the keeper has removed every
// trace of it: processes, mounts (they die with the mount namespace), the
// cgroup and the state directory.
func Stop(ctx context.Context, name string) error {
	b, err := os.ReadFile(stateFile(name))
	if errors.Is(err, os.ErrNotExist) {
		// Nothing booted, but a half-started sandbox may have left a cgroup.
		return clearStale(ctx, name)
	}
	var sb Sandbox
	if err == nil {
		err = json.Unmarshal(b, &sb)
	}
	if err != nil {
		return fmt.Errorf("sandbox %s: reading state: %w", name, err)
	}
	return sb.Stop(ctx)
}

// Stop powers the sandbox off; see the package function Stop.
func (s *Sandbox) Stop(ctx context.Context) error {
	// A delay's queue would hold the dead namespace open.
	if l := s.delay; l != nil {
		s.delay = nil
		_ = l.stop(ctx, s)
	}
	if alive(s.KeeperPID, s.KeeperStartTime) {
		_ = syscall.Kill(s.KeeperPID, syscall.SIGTERM)
		if err := waitGone(ctx, s.KeeperPID, s.KeeperStartTime); err != nil {
			return fmt.Errorf("sandbox %s: waiting for keeper %d: %w", s.Name, s.KeeperPID, err)
		}
	}
	// The keeper normally cleans up; if it died, finish its job.
	return clearStale(ctx, s.Name)
}

// clearStale removes what a dead keeper left behind. A live keeper whose
// owner has died is already shutting its sandbox down: wait for it.
func clearStale(ctx context.Context, name string) error {
	b, err := os.ReadFile(stateFile(name))
	if err == nil {
		var sb Sandbox
		if json.Unmarshal(b, &sb) == nil {
			if alive(sb.KeeperPID, sb.KeeperStartTime) {
				if alive(sb.PID, sb.StartTime) && (sb.OwnerPID == 0 || processExists(sb.OwnerPID)) {
					return fmt.Errorf("sandbox %s is already running (keeper pid %d); stop it first", name, sb.KeeperPID)
				}
				wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
				defer cancel()
				if err := waitGone(wctx, sb.KeeperPID, sb.KeeperStartTime); err != nil {
					return fmt.Errorf("sandbox %s: previous keeper %d still shutting down: %w", name, sb.KeeperPID, err)
				}
			}
			if alive(sb.PID, sb.StartTime) {
				// Killing a PID namespace's init kills the whole namespace.
				_ = syscall.Kill(sb.PID, syscall.SIGKILL)
				if err := waitGone(ctx, sb.PID, sb.StartTime); err != nil {
					return fmt.Errorf("sandbox %s: stale systemd %d: %w", name, sb.PID, err)
				}
			}
		}
	}
	if cg, err := cgroupPath(name); err == nil {
		if err := removeCgroup(ctx, cg); err != nil {
			return fmt.Errorf("sandbox %s: %w", name, err)
		}
	}
	if err := os.RemoveAll(stateDir(name)); err != nil {
		return fmt.Errorf("sandbox %s: %w", name, err)
	}
	// StateRoot itself stays (an empty directory on /run): removing it when
	// empty raced a sandbox being made, whose MkdirAll had just made it
	// ("mkdir /run/flexiq-sandbox/NAME: no such file or directory").
	return nil
}

// List names the sandboxes that have state on this host.
func List() []string {
	ents, _ := os.ReadDir(StateRoot)
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// Command returns a command that runs argv inside the sandbox, in all of its
// namespaces and with its root and working directory.
func (s *Sandbox) Command(ctx context.Context, argv ...string) *exec.Cmd {
	args := append([]string{"-t", strconv.Itoa(s.PID), "-a", "-r", "-w", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	// A clean, predictable environment, as a unit or a login would have.
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"}
	return cmd
}

// Exec runs argv inside the sandbox and returns its combined output. The
// error includes the output, so a failing test says what went wrong.
func (s *Sandbox) Exec(ctx context.Context, argv ...string) (string, error) {
	out, err := s.Command(ctx, argv...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("sandbox %s: %s: %w\n%s", s.Name, strings.Join(argv, " "), err, out)
	}
	return string(out), nil
}

// Bus opens a go-systemd connection to the sandbox's system manager over its
// system bus, as the daemon under test would on a real host.
func (s *Sandbox) Bus(ctx context.Context) (*sddbus.Conn, error) {
	return sddbus.NewConnection(func() (*dbus.Conn, error) { return s.BusConn(ctx) })
}

// BusConn opens one authenticated connection to the sandbox's system bus
// that has said Hello: what units.Options.Dial returns.
func (s *Sandbox) BusConn(ctx context.Context) (*dbus.Conn, error) {
	return units.HelloBus(ctx, func(opts ...dbus.ConnOption) (*dbus.Conn, error) {
		return dbus.Dial(s.BusAddress, opts...)
	})
}

// JournalEntry is one journal record, as `journalctl -o json` prints it.
type JournalEntry map[string]any

// Field returns a field as a string ("" when absent or binary).
func (e JournalEntry) Field(k string) string {
	s, _ := e[k].(string)
	return s
}

// Journal returns the sandbox's journal entries that match the journalctl
// arguments, e.g. ("-u", "foo.service") or ("FLEXIQ_POOL=email").
func (s *Sandbox) Journal(ctx context.Context, args ...string) ([]JournalEntry, error) {
	argv := append([]string{"journalctl", "--no-pager", "-o", "json"}, args...)
	out, err := s.Command(ctx, argv...).Output()
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: journalctl %s: %w", s.Name, strings.Join(args, " "), err)
	}
	var entries []JournalEntry
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var e JournalEntry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("sandbox %s: decoding journal: %w", s.Name, err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// startTime reads a process's start time (clock ticks since boot), which with
// the PID identifies one process for good.
func startTime(pid int) (uint64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return st.Starttime, nil
}

// alive reports whether pid is still the process that started at start.
// Zombies count as gone: they hold nothing but a PID.
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	p, err := procfs.NewProc(pid)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	if err != nil || st.State == "Z" {
		return false
	}
	return start == 0 || st.Starttime == start
}

func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func waitGone(ctx context.Context, pid int, start uint64) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for alive(pid, start) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
