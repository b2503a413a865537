package sandbox

// The keeper stage: the process that boots a sandbox and stays with it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// keeper is the keeper stage's state. It starts the sandbox's init, tells
// Start how the boot went, then stays until the sandbox is to stop (a
// signal, or its owner exiting) and removes what the sandbox left.
type keeper struct {
	ks       keeperSpec
	ready    *os.File // the readiness pipe to Start (fd 3)
	reported bool
	cg       string // the sandbox's cgroup
	sb       *Sandbox
	exited   chan struct{} // closed once the sandbox's init has exited

	booted     chan error // waitBoot's verdict; whoever reads it puts it back
	cancelBoot context.CancelFunc
}

func runKeeper() int {
	k := &keeper{ready: os.NewFile(3, "ready")}
	if err := json.Unmarshal([]byte(os.Getenv(specEnv)), &k.ks); err != nil {
		k.tell(report{Error: "keeper: bad spec: " + err.Error()})
		return 1
	}
	opts := k.ks.Options
	// From here on SIGTERM/SIGINT/SIGHUP mean "stop the sandbox", never "die".
	stopSig := make(chan os.Signal, 1)
	signal.Notify(stopSig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	cg, err := cgroupPath(opts.Name)
	if err == nil {
		err = os.Mkdir(cg, 0o755)
	}
	if err != nil {
		k.tell(report{Error: "creating cgroup: " + err.Error()})
		return 1
	}
	k.cg = cg
	if err := k.startInit(); err != nil {
		k.tell(report{Error: err.Error()})
		k.cleanup()
		return 1
	}
	if err := k.attachLink(); err != nil {
		k.tell(report{Error: err.Error()})
		_ = syscall.Kill(k.sb.PID, syscall.SIGKILL)
		<-k.exited
		k.cleanup()
		return 1
	}
	// The state is written before boot completes so that `stop` works on a
	// sandbox that hangs while booting.
	if err := writeState(k.sb); err != nil {
		k.logf("%v", err)
	}

	ownerGone := watchOwner(opts.OwnerPID)
	bootCtx, cancelBoot := context.WithTimeout(context.Background(), opts.BootTimeout)
	defer cancelBoot()
	k.booted, k.cancelBoot = make(chan error, 1), cancelBoot
	go func() { k.booted <- waitBoot(bootCtx, k.sb) }()
	if !k.awaitBoot(stopSig, ownerGone) {
		return 1
	}

	select {
	case <-k.exited:
		k.logf("systemd exited on its own")
		k.cleanup()
	case s := <-stopSig:
		k.shutdown(s.String())
	case <-ownerGone:
		k.shutdown(fmt.Sprintf("owner pid %d exited", opts.OwnerPID))
	}
	return 0
}

// tell sends Start the report, once; later ones are dropped.
func (k *keeper) tell(rep report) {
	if !k.reported {
		k.reported = true
		_ = json.NewEncoder(k.ready).Encode(rep)
		k.ready.Close()
	}
}

func (k *keeper) logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s keeper[%s]: %s\n", time.Now().Format(time.RFC3339Nano), k.ks.Name, fmt.Sprintf(format, a...))
}

// startInit starts the sandbox's init in new namespaces, its output to the
// console log, and makes k.sb of it. Its error is what Start is told.
func (k *keeper) startInit() error {
	opts := k.ks.Options
	spec, _ := json.Marshal(initSpec{Options: opts, Cgroup: k.cg})
	initCmd, err := selfCommand(stageInit, spec)
	if err != nil {
		return err
	}
	console, err := os.OpenFile(consoleLog(opts.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	initCmd.Stdout, initCmd.Stderr = console, console
	initCmd.SysProcAttr = &syscall.SysProcAttr{
		// The cgroup namespace is unshared by init itself, after it has moved
		// into the sandbox's cgroup, so that this cgroup becomes its root.
		Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWNET,
		Setsid:     true,
	}
	if err := initCmd.Start(); err != nil {
		return fmt.Errorf("starting init: %w", err)
	}
	console.Close()
	k.exited = make(chan struct{})
	go func() { _ = initCmd.Wait(); close(k.exited) }()

	k.sb = &Sandbox{
		Name:       opts.Name,
		PID:        initCmd.Process.Pid,
		KeeperPID:  os.Getpid(),
		OwnerPID:   opts.OwnerPID,
		BusAddress: fmt.Sprintf("unix:path=/proc/%d/root/run/dbus/system_bus_socket", initCmd.Process.Pid),
		Cgroup:     k.cg,
	}
	k.sb.StartTime, _ = startTime(k.sb.PID)
	k.sb.KeeperStartTime, _ = startTime(k.sb.KeeperPID)
	return nil
}

// attachLink joins the sandbox to its Net, if it has one: before systemd
// runs, so that its services see the address.
func (k *keeper) attachLink() error {
	if k.ks.Link == nil {
		return nil
	}
	if err := k.ks.Link.attach(k.sb.PID, k.sb.KeeperPID); err != nil {
		return err
	}
	k.sb.NetAddr, k.sb.NetLink = k.ks.Link.Addr, k.ks.Link.Host
	return nil
}

// awaitBoot waits for the boot, a signal, the owner's exit or init's, and
// tells Start. false: the sandbox did not come up, and is gone.
func (k *keeper) awaitBoot(stopSig <-chan os.Signal, ownerGone <-chan struct{}) bool {
	name := k.ks.Name
	select {
	case err := <-k.booted:
		k.booted <- err // shutdown reads it again
		if err != nil {
			k.tell(report{Error: err.Error() + "\n" + tail(consoleLog(name), 40)})
			k.shutdown("boot failed")
			return false
		}
		if err := writeState(k.sb); err != nil {
			k.logf("%v", err)
		}
		k.tell(report{Sandbox: k.sb})
	case <-k.exited:
		k.tell(report{Error: "sandbox init exited during boot:\n" + tail(consoleLog(name), 40)})
		k.cancelBoot()
		<-k.booted
		k.cleanup()
		return false
	case s := <-stopSig:
		k.tell(report{Error: "stopped during boot by " + s.String()})
		k.shutdown(s.String())
		return false
	case <-ownerGone:
		k.tell(report{Error: "owner exited during boot"})
		k.shutdown("owner exited")
		return false
	}
	return true
}

// shutdown powers the sandbox off, SIGKILL to its init if it is not gone
// after StopTimeout, and cleans up.
func (k *keeper) shutdown(why string) {
	k.logf("stopping: %s", why)
	// No new process may enter the sandbox once killEntered has run.
	k.cancelBoot()
	<-k.booted
	killEntered(k.sb.PID)
	_ = syscall.Kill(k.sb.PID, sigPoweroff)
	select {
	case <-k.exited:
	case <-time.After(k.ks.StopTimeout):
		k.logf("no clean poweroff after %s; SIGKILL to the namespace's init", k.ks.StopTimeout)
		_ = syscall.Kill(k.sb.PID, syscall.SIGKILL)
		<-k.exited
	}
	k.cleanup()
}

// cleanup removes what the sandbox left on the host: its link, its cgroup,
// its state directory.
func (k *keeper) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if k.ks.Link != nil {
		if err := k.ks.Link.detach(ctx); err != nil {
			k.logf("%v", err)
		}
	}
	// Bridges of owners that died with no chance to close them.
	sweepLinks(ctx)
	if err := removeCgroup(ctx, k.cg); err != nil {
		k.logf("%v", err)
	}
	// The logs go with the state directory unless something failed.
	if err := os.RemoveAll(stateDir(k.ks.Name)); err != nil {
		k.logf("%v", err)
	}
	// StateRoot stays: see clearStale.
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
