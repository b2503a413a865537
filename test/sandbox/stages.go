package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// The keeper and the sandbox's pre-systemd init are this same binary,
// re-executed with a stage in the environment (the reexec pattern), so that a
// test binary that imports this package carries everything it needs.
const (
	stageEnv    = "FLEXIQ_SANDBOX_STAGE"
	specEnv     = "FLEXIQ_SANDBOX_SPEC"
	stageKeeper = "keeper"
	stageInit   = "init"
)

const systemdBinary = "/lib/systemd/systemd"

// sigPoweroff is SIGRTMIN+4 as systemd counts it (glibc's SIGRTMIN is 34):
// systemd as PID 1 answers it by starting poweroff.target.
const sigPoweroff = syscall.Signal(38)

// Units that the host image enables but that have no business in a test
// sandbox: they would grab the host's terminals, reach for the network, or
// wake up to do maintenance in the middle of a test.
var maskedUnits = []string{
	"getty@.service", "serial-getty@.service", "console-getty.service", "container-getty@.service",
	"apt-daily.timer", "apt-daily-upgrade.timer", "man-db.timer", "dpkg-db-backup.timer",
	"e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer", "systemd-tmpfiles-clean.timer",
	"postgresql.service", "systemd-timesyncd.service", "systemd-pstore.service",
	"docker.service", "docker.socket", "containerd.service", "ssh.service", "cron.service",
}

// Servers that the host's packages enable but that tests start themselves
// when they need them (test/servers; nginx for service pools): not started at boot, so that they
// cost nothing in the sandboxes of tests that do not use them. Unlike the
// masked units, they can still be started.
var notAtBoot = []string{"redis-server.service", "prometheus.service", "prometheus-node-exporter.service", "nginx.service"}

func init() {
	switch os.Getenv(stageEnv) {
	case stageKeeper:
		os.Exit(runKeeper())
	case stageInit:
		// Namespace and mount work must stay on the one thread that execs.
		runtime.LockOSThread()
		err := runInit()
		fmt.Fprintf(os.Stderr, "sandbox init: %v\n", err)
		os.Exit(1)
	}
}

func selfCommand(stage string, spec []byte) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating own executable: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), stageEnv+"="+stage, specEnv+"="+string(spec))
	return cmd, nil
}

// initSpec is what the keeper hands the namespaced init.
type initSpec struct {
	Options
	Cgroup string
}

func runKeeper() int {
	ready := os.NewFile(3, "ready")
	reported := false
	tell := func(rep report) {
		if !reported {
			reported = true
			_ = json.NewEncoder(ready).Encode(rep)
			ready.Close()
		}
	}
	var ks keeperSpec
	if err := json.Unmarshal([]byte(os.Getenv(specEnv)), &ks); err != nil {
		tell(report{Error: "keeper: bad spec: " + err.Error()})
		return 1
	}
	opts := ks.Options
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s keeper[%s]: %s\n", time.Now().Format(time.RFC3339Nano), opts.Name, fmt.Sprintf(format, a...))
	}
	// From here on SIGTERM/SIGINT/SIGHUP mean "stop the sandbox", never "die".
	stopSig := make(chan os.Signal, 1)
	signal.Notify(stopSig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	cg, err := cgroupPath(opts.Name)
	if err == nil {
		err = os.Mkdir(cg, 0o755)
	}
	if err != nil {
		tell(report{Error: "creating cgroup: " + err.Error()})
		return 1
	}
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if ks.Link != nil {
			if err := ks.Link.detach(ctx); err != nil {
				logf("%v", err)
			}
		}
		// Bridges of owners that died with no chance to close them.
		sweepLinks(ctx)
		if err := removeCgroup(ctx, cg); err != nil {
			logf("%v", err)
		}
		// The logs go with the state directory unless something failed.
		if err := os.RemoveAll(stateDir(opts.Name)); err != nil {
			logf("%v", err)
		}
		_ = os.Remove(StateRoot)
	}

	spec, _ := json.Marshal(initSpec{Options: opts, Cgroup: cg})
	initCmd, err := selfCommand(stageInit, spec)
	if err != nil {
		tell(report{Error: err.Error()})
		cleanup()
		return 1
	}
	console, err := os.OpenFile(consoleLog(opts.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tell(report{Error: err.Error()})
		cleanup()
		return 1
	}
	initCmd.Stdout, initCmd.Stderr = console, console
	initCmd.SysProcAttr = &syscall.SysProcAttr{
		// The cgroup namespace is unshared by init itself, after it has moved
		// into the sandbox's cgroup, so that this cgroup becomes its root.
		Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWNET,
		Setsid:     true,
	}
	if err := initCmd.Start(); err != nil {
		tell(report{Error: "starting init: " + err.Error()})
		cleanup()
		return 1
	}
	console.Close()
	exited := make(chan struct{})
	go func() { _ = initCmd.Wait(); close(exited) }()

	sb := &Sandbox{
		Name:       opts.Name,
		PID:        initCmd.Process.Pid,
		KeeperPID:  os.Getpid(),
		OwnerPID:   opts.OwnerPID,
		BusAddress: fmt.Sprintf("unix:path=/proc/%d/root/run/dbus/system_bus_socket", initCmd.Process.Pid),
		Cgroup:     cg,
	}
	sb.StartTime, _ = startTime(sb.PID)
	sb.KeeperStartTime, _ = startTime(sb.KeeperPID)
	if ks.Link != nil {
		// Before systemd runs, so that its services see the address.
		if err := ks.Link.attach(sb.PID, sb.KeeperPID); err != nil {
			tell(report{Error: err.Error()})
			_ = syscall.Kill(sb.PID, syscall.SIGKILL)
			<-exited
			cleanup()
			return 1
		}
		sb.NetAddr, sb.NetLink = ks.Link.Addr, ks.Link.Host
	}
	// The state is written before boot completes so that `stop` works on a
	// sandbox that hangs while booting.
	if err := writeState(sb); err != nil {
		logf("%v", err)
	}

	ownerGone := watchOwner(opts.OwnerPID)
	bootCtx, cancelBoot := context.WithTimeout(context.Background(), opts.BootTimeout)
	defer cancelBoot()
	booted := make(chan error, 1)
	go func() { booted <- waitBoot(bootCtx, sb) }()
	shutdown := func(why string) {
		logf("stopping: %s", why)
		// No new process may enter the sandbox once killEntered has run.
		cancelBoot()
		<-booted
		killEntered(sb.PID)
		_ = syscall.Kill(sb.PID, sigPoweroff)
		select {
		case <-exited:
		case <-time.After(opts.StopTimeout):
			logf("no clean poweroff after %s; SIGKILL to the namespace's init", opts.StopTimeout)
			_ = syscall.Kill(sb.PID, syscall.SIGKILL)
			<-exited
		}
		cleanup()
	}

	select {
	case err := <-booted:
		booted <- err // shutdown reads it again
		if err != nil {
			tell(report{Error: err.Error() + "\n" + tail(consoleLog(opts.Name), 40)})
			shutdown("boot failed")
			return 1
		}
		if err := writeState(sb); err != nil {
			logf("%v", err)
		}
		tell(report{Sandbox: sb})
	case <-exited:
		tell(report{Error: "sandbox init exited during boot:\n" + tail(consoleLog(opts.Name), 40)})
		cancelBoot()
		<-booted
		cleanup()
		return 1
	case s := <-stopSig:
		tell(report{Error: "stopped during boot by " + s.String()})
		shutdown(s.String())
		return 1
	case <-ownerGone:
		tell(report{Error: "owner exited during boot"})
		shutdown("owner exited")
		return 1
	}

	select {
	case <-exited:
		logf("systemd exited on its own")
		cleanup()
	case s := <-stopSig:
		shutdown(s.String())
	case <-ownerGone:
		shutdown(fmt.Sprintf("owner pid %d exited", opts.OwnerPID))
	}
	return 0
}

// killEntered ends the processes inside the sandbox whose parent is outside
// it: commands that Exec entered with nsenter, and their children once
// nsenter itself is gone (the kernel hands those orphans to the host's
// reaper, not to the sandbox's PID 1). systemd-shutdown would see them exit
// without a SIGCHLD and sit out its 90 s timeout for them, so this waits
// until they have left the process table, zombies included.
func killEntered(initPID int) {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", initPID))
	if err != nil {
		return
	}
	inSandbox := func(pid int) bool {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
		return err == nil && l == ns
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		procs, err := procfs.AllProcs()
		if err != nil {
			return
		}
		found := false
		for _, p := range procs {
			if p.PID == initPID || !inSandbox(p.PID) {
				continue
			}
			if st, err := p.Stat(); err == nil && !inSandbox(st.PPID) {
				found = true
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
		if !found {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeState(sb *Sandbox) error {
	b, _ := json.MarshalIndent(sb, "", "  ")
	tmp := stateFile(sb.Name) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, stateFile(sb.Name))
}

// watchOwner returns a channel that is closed when pid exits. A pidfd makes
// this exact, with no polling and no PID-reuse race.
func watchOwner(pid int) <-chan struct{} {
	if pid <= 0 {
		return nil
	}
	gone := make(chan struct{})
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		close(gone) // already gone
		return gone
	}
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
				close(gone)
				return
			}
		}
	}()
	return gone
}

// waitBoot waits for systemd's startup to finish. "degraded" is a finished
// boot too; the failed units are recorded so that the caller can print them.
func waitBoot(ctx context.Context, sb *Sandbox) error {
	for {
		// systemctl fails at once until PID 1 has its private socket up.
		out, _ := sb.Command(ctx, "systemctl", "is-system-running", "--wait").Output()
		state := strings.TrimSpace(string(out))
		switch state {
		case "running":
			sb.SystemState = state
			return nil
		case "degraded":
			sb.SystemState = state
			failed, _ := sb.Command(ctx, "systemctl", "list-units", "--failed", "--plain", "--no-legend").Output()
			for _, l := range strings.Split(strings.TrimSpace(string(failed)), "\n") {
				if f := strings.Fields(l); len(f) > 0 {
					sb.FailedUnits = append(sb.FailedUnits, f[0])
				}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("systemd did not finish booting: %w (last state %q)", ctx.Err(), state)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runInit runs as PID 1 of the new PID namespace, in a private copy of the
// host's mount namespace. It builds the sandbox's root filesystem and execs
// systemd on it. It returns only on failure.
func runInit() error {
	var spec initSpec
	if err := json.Unmarshal([]byte(os.Getenv(specEnv)), &spec); err != nil {
		return fmt.Errorf("bad spec: %w", err)
	}
	// Into the sandbox's own cgroup first, then a cgroup namespace rooted
	// there: systemd then manages that subtree as if it were the whole tree.
	if err := os.WriteFile(filepath.Join(spec.Cgroup, "cgroup.procs"), []byte("0"), 0); err != nil {
		return fmt.Errorf("joining cgroup %s: %w", spec.Cgroup, err)
	}
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("unshare cgroup namespace: %w", err)
	}
	// Nothing mounted from here on may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	base := filepath.Join(stateDir(spec.Name), "mnt")
	root := filepath.Join(base, "root")
	steps := []struct {
		desc string
		fn   func() error
	}{
		{"scratch tmpfs", func() error {
			if err := os.MkdirAll(base, 0o700); err != nil {
				return err
			}
			return unix.Mount("tmpfs", base, "tmpfs", 0, "mode=0700")
		}},
		{"overlay", func() error {
			for _, d := range []string{"upper", "work", "root"} {
				if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
					return err
				}
			}
			// lowerdir=/ shows the host's root filesystem only (not its other
			// mounts); every write lands in upperdir, on the tmpfs.
			opts := fmt.Sprintf("lowerdir=/,upperdir=%s/upper,workdir=%s/work", base, base)
			return unix.Mount("overlay", root, "overlay", 0, opts)
		}},
		{"proc", func() error {
			return unix.Mount("proc", root+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
		// sysfs read-only: no udev inside may poke the host's devices.
		{"sysfs", func() error {
			return unix.Mount("sysfs", root+"/sys", "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
		{"cgroup2", func() error {
			return unix.Mount("cgroup2", root+"/sys/fs/cgroup", "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
		{"/dev", func() error {
			return unix.Mount("/dev", root+"/dev", "", unix.MS_BIND|unix.MS_REC, "")
		}},
		// PID 1 writes to /dev/console: give it the console log rather than
		// the host's console.
		{"/dev/console", func() error {
			return unix.Mount(consoleLog(spec.Name), root+"/dev/console", "", unix.MS_BIND, "")
		}},
		// A clean /tmp and /run: the sandbox's tmpfiles cleanup then has
		// nothing of the host's to see, not even through the overlay.
		{"/tmp", func() error {
			return unix.Mount("tmpfs", root+"/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
		}},
		{"/run", func() error {
			return unix.Mount("tmpfs", root+"/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755")
		}},
		{"binds", func() error {
			for _, b := range spec.Binds {
				src, dst := splitBind(b)
				if err := os.MkdirAll(root+dst, 0o755); err != nil {
					return err
				}
				if err := unix.Mount(src, root+dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
					return fmt.Errorf("%s: %w", b, err)
				}
			}
			return nil
		}},
		{"masks", func() error {
			dir := root + "/etc/systemd/system"
			for _, u := range maskedUnits {
				_ = os.Remove(filepath.Join(dir, u))
				if err := os.Symlink("/dev/null", filepath.Join(dir, u)); err != nil {
					return err
				}
			}
			for _, u := range notAtBoot {
				_ = os.Remove(filepath.Join(dir, "multi-user.target.wants", u))
			}
			return nil
		}},
		// A container image's policy-rc.d (Docker's exits 101) forbids
		// maintainer scripts to start services. The sandbox is a booted
		// system, where dpkg -i should start what it installs.
		{"policy-rc.d", func() error {
			err := os.Remove(root + "/usr/sbin/policy-rc.d")
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}},
		// Its own machine ID, so that journals and D-Bus never mistake it for the host.
		{"machine-id", func() error {
			id := make([]byte, 16)
			if _, err := rand.Read(id); err != nil {
				return err
			}
			return os.WriteFile(root+"/etc/machine-id", []byte(hex.EncodeToString(id)+"\n"), 0o444)
		}},
		// systemd sets the hostname from /etc/hostname at boot.
		{"hostname", func() error {
			if err := os.WriteFile(root+"/etc/hostname", []byte(spec.Name+"\n"), 0o644); err != nil {
				return err
			}
			return unix.Sethostname([]byte(spec.Name))
		}},
		{"pivot_root", func() error {
			if err := unix.Chdir(root); err != nil {
				return err
			}
			// pivot_root(".", ".") stacks the old root on top of the new one;
			// a lazy unmount then drops the host's tree from this namespace.
			if err := unix.PivotRoot(".", "."); err != nil {
				return err
			}
			if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
				return err
			}
			return unix.Chdir("/")
		}},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.desc, err)
		}
	}
	env := []string{"container=flexiq-sandbox", "TERM=dumb"}
	// systemd's own messages (unit start/stop, watchdog timeouts, kills) go
	// to the sandbox's journal, where tests read them.
	return unix.Exec(systemdBinary, []string{systemdBinary, "--show-status=0"}, env)
}
