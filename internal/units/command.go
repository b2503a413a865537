package units

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// A command source's program runs in a transient service of its own,
// flexiq-source-<pool>-<random>.service (a command readiness probe's
// flexiq-probe-…, an after-change command's flexiq-hook-…: For), in the
// manner of systemd-run
// --pipe --wait (systemd's src/run/run.c): Type=exec, its standard output
// and error the write ends of pipes the daemon passes over D-Bus
// (StandardOutputFileDescriptor=, StandardErrorFileDescriptor=), and the
// daemon reads the read ends. Stopping the unit kills everything in its
// cgroup (KillMode=control-group, the default), so that a child that left
// the command's process group (setsid, a double fork) does not outlive the
// command's timeout. The name is never a worker's (those have "@"), and
// the units live in system.slice, not under flexiq.slice, so that a limit an
// administrator puts on the workers does not count the sources.
//
// The kinds name the units after what they run, so that the journal and
// systemctl tell a pool's probes and hooks from its source.
const (
	CommandSource = "source"
	CommandProbe  = "probe"
	CommandHook   = "hook"
)

// commandStopTimeout bounds stopping a command's unit and reading what is
// left in its pipes once the caller's context has ended.
const commandStopTimeout = 10 * time.Second

// commandRuntimeMax is RuntimeMaxSec= beyond the caller's deadline: a
// backstop, should the daemon die before it stops the unit. Without a
// deadline, the unit gets commandRuntimeMaxDefault.
const (
	commandRuntimeMax        = 30 * time.Second
	commandRuntimeMaxDefault = time.Hour
)

// CommandRunner runs a pool's command source's program as a transient
// unit; it implements internal/source's CommandRunner.
type CommandRunner struct {
	m    *Manager
	pool string
	kind string // CommandSource unless For says otherwise
	// user and group are User= and Group= of the units; "" leaves them
	// out (accountProperties).
	user, group string
}

// CommandRunner returns a runner whose units are named after pool and run
// as the daemon does (root).
func (m *Manager) CommandRunner(pool string) *CommandRunner {
	return &CommandRunner{m: m, pool: pool, kind: CommandSource}
}

// For returns a runner like r whose units are named for kind
// (CommandProbe, CommandHook).
func (r *CommandRunner) For(kind string) *CommandRunner {
	c := *r
	c.kind = kind
	return &c
}

// As returns a runner like r whose commands run as user and group (User=
// and Group=, as the pool's workers get them): a service pool's command
// readiness probes run as the pool's user (issue 27). "" for either leaves
// it to systemd: as the daemon without a user, in the user's primary group
// without a group.
func (r *CommandRunner) As(user, group string) *CommandRunner {
	c := *r
	c.user, c.group = user, group
	return &c
}

// commandUnitName is a fresh unit name for one run of pool's command of
// kind. Never a worker's (no "@") nor a wake address's (a random tail).
func commandUnitName(kind, pool string) string {
	var b [6]byte
	rand.Read(b[:])
	return unitPrefix + kind + "-" + pool + "-" + hex.EncodeToString(b[:]) + unitSuffix
}

// RunCommand runs argv with env, in /, as a transient unit, copies its
// standard output and error into stdout and stderr, and returns once the
// unit is gone. The unit is stopped, which kills its whole cgroup, when ctx
// ends or a write to stdout or stderr fails.
func (r *CommandRunner) RunCommand(ctx context.Context, argv, env []string, stdout, stderr io.Writer) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("empty command")
	}
	// systemd would say 203/EXEC; the daemon sees the same files.
	if _, err := os.Stat(argv[0]); err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	defer outR.Close()
	defer errR.Close()
	unit := commandUnitName(r.kind, r.pool)
	runtimeMax := commandRuntimeMaxDefault
	if d, ok := ctx.Deadline(); ok {
		runtimeMax = time.Until(d) + commandRuntimeMax
	}
	props := r.properties(argv, env, outW, errW, runtimeMax)
	result := make(chan string, 1)
	err = r.m.call(ctx, "starting "+unit, func(c *conn) error {
		_, err := c.StartTransientUnitContext(ctx, unit, "fail", props, result)
		return err
	})
	// systemd holds its own copies now: the pipes reach EOF when the
	// command and everything it started have closed theirs and systemd
	// has released the unit's.
	outW.Close()
	errW.Close()
	if err != nil {
		return err
	}

	copied, failed := copyOutputs([2]*os.File{outR, errR}, [2]io.Writer{stdout, stderr})
	var stopped error
	select {
	case <-copied:
	case err := <-failed:
		stopped = fmt.Errorf("%w; unit %s stopped: everything in its cgroup was killed", err, unit)
	case <-ctx.Done():
		stopped = fmt.Errorf("unit %s stopped: everything in its cgroup was killed", unit)
	}
	// From here on, the caller's context may have ended.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandStopTimeout)
	defer cancel()
	defer r.unref(sctx, unit)
	if stopped != nil {
		if err := r.stop(sctx, unit); err != nil {
			stopped = fmt.Errorf("%w (stopping it: %v)", stopped, err)
		}
		select {
		case <-copied:
		case <-sctx.Done():
			// Something still holds the pipes; stop reading them.
			outR.Close()
			errR.Close()
			<-copied
		}
		return stopped
	}
	return r.result(sctx, unit)
}

// properties are the transient unit's. It runs as the daemon does, as
// root unless the runner is As another user, with the daemon's own sandbox (systemd/flexiq-scaled.service),
// which a command run as the daemon's child had inherited, so that it sees
// and may do what it did before; the difference is that /tmp, /var/tmp,
// /dev and IPC are the unit's own, not shared with the daemon.
func (r *CommandRunner) properties(argv, env []string, stdout, stderr *os.File, runtimeMax time.Duration) []sddbus.Property {
	props := []sddbus.Property{
		sddbus.PropDescription("flexiq-scaled: command source of pool " + r.pool),
		sddbus.PropType("exec"),
		// false: a failure is the unit's failure (go-systemd's
		// "uncleanIsFailure" is D-Bus's IgnoreFailure).
		sddbus.PropExecStart(literalArgv(argv), false),
		prop("WorkingDirectory", "/"),
		prop("Environment", commandUnitEnv(env)),
		prop("StandardInput", "null"),
		prop("StandardOutputFileDescriptor", dbus.UnixFD(stdout.Fd())),
		prop("StandardErrorFileDescriptor", dbus.UnixFD(stderr.Fd())),
		// The unit stays loaded, whatever its end, until RunCommand has
		// read its result and dropped the reference (or the daemon's bus
		// connection is gone); then systemd forgets it, failed or not.
		prop("AddRef", true),
		prop("CollectMode", "inactive-or-failed"),
		prop("RuntimeMaxUSec", uint64(runtimeMax/time.Microsecond)),
		// A stop is the end of a command that ran out of time: no grace.
		prop("KillSignal", int32(9)),
		prop("KillMode", "control-group"),
		prop("SendSIGHUP", false),

		// The daemon's sandbox, as in systemd/flexiq-scaled.service.
		prop("NoNewPrivileges", true),
		prop("ProtectSystem", "full"),
		prop("ProtectHome", "tmpfs"),
		prop("PrivateTmp", true),
		prop("PrivateDevices", true),
		prop("PrivateIPC", true),
		prop("RestrictAddressFamilies", allowList{true, []string{"AF_UNIX", "AF_INET", "AF_INET6"}}),
	}
	props = append(props, protectKernel()...)
	props = append(props,
		prop("ProtectProc", "invisible"),
		prop("RestrictNamespaces", uint64(0)),
		prop("RestrictRealtime", true),
		prop("RestrictSUIDSGID", true),
		prop("LockPersonality", true),
		prop("MemoryDenyWriteExecute", true),
		prop("SystemCallArchitectures", []string{"native"}),
		prop("SystemCallFilter", allowList{true, []string{"@system-service"}}),
		prop("SystemCallFilter", allowList{false, []string{"@resources"}}),
		prop("SystemCallErrorNumber", int32(ePERM)),
		prop("CapabilityBoundingSet", uint64(1<<0|1<<1)), // CAP_CHOWN, CAP_DAC_OVERRIDE
		prop("UMask", uint32(0o077)),
	)
	return append(props, accountProperties(r.user, r.group)...)
}

// literalArgv escapes "$" as "$$": systemd expands $VAR and ${VAR} in
// ExecStart= at every start, and the command's arguments, as written in
// the configuration, are meant as they are (the command has always run
// without a shell or any expansion).
func literalArgv(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = strings.ReplaceAll(a, "$", "$$")
	}
	return out
}

// commandUnitEnv is the command's environment without what systemd sets
// for each unit itself (its own invocation, its own journal stream), so
// that the unit's values, not the daemon's, are what the command sees.
func commandUnitEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "INVOCATION_ID", "JOURNAL_STREAM", "SYSTEMD_EXEC_PID", "MANAGERPID":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// stop stops the unit, killing its cgroup, and waits for the job.
func (r *CommandRunner) stop(ctx context.Context, unit string) error {
	done := make(chan string, 1)
	err := r.m.call(ctx, "stopping "+unit, func(c *conn) error {
		_, err := c.StopUnitContext(ctx, unit, "replace", done)
		return err
	})
	if err != nil {
		if dbusErrorName(err) == "org.freedesktop.systemd1.NoSuchUnit" {
			return nil
		}
		return err
	}
	select {
	case res := <-done:
		if res != "done" {
			return fmt.Errorf("stop job %s", res)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the stop job: %w", ctx.Err())
	}
}

// unref drops AddRef's reference: systemd then forgets the unit.
func (r *CommandRunner) unref(ctx context.Context, unit string) {
	if c, err := r.m.current(); err == nil {
		c.bus.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1").
			CallWithContext(ctx, "org.freedesktop.systemd1.Manager.UnrefUnit", 0, unit)
	}
}

// result waits for the unit to be inactive or failed (its pipes are closed
// once it is) and says how the command ended: nil for exit status 0.
func (r *CommandRunner) result(ctx context.Context, unit string) error {
	get := func(iface, name string) (any, error) {
		var v any
		err := r.m.call(ctx, "reading "+unit+"'s "+name, func(c *conn) error {
			var p *sddbus.Property
			var err error
			if iface == "Service" {
				p, err = c.GetServicePropertyContext(ctx, unit, name)
			} else {
				p, err = c.GetUnitPropertyContext(ctx, unit, name)
			}
			if err == nil {
				v = p.Value.Value()
			}
			return err
		})
		return v, err
	}
	delay := 5 * time.Millisecond
	for {
		v, err := get("Unit", "ActiveState")
		if err != nil {
			return err
		}
		state, _ := v.(string)
		if state == "inactive" || state == "failed" {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still %s after its output ended: %w", unit, state, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
	// A unit systemd has already forgotten (its reference went with a
	// lost bus connection) reads as not-found: its result is lost.
	if v, err := get("Unit", "LoadState"); err != nil {
		return err
	} else if v != "loaded" {
		return fmt.Errorf("%s was unloaded before its result was read (load state %v)", unit, v)
	}
	// Not the unit's Result: systemd counts a service killed by SIGTERM,
	// SIGHUP, SIGINT or SIGPIPE as a success, where a command that dies
	// so has given no answer.
	res, err := get("Service", "Result")
	if err != nil {
		return err
	}
	code, err := get("Service", "ExecMainCode")
	if err != nil {
		return err
	}
	status, err := get("Service", "ExecMainStatus")
	if err != nil {
		return err
	}
	return commandExitError(res, code, status)
}

// commandExitError says how a command ended, from its unit's Result,
// ExecMainCode (CLD_* of waitid(2)) and ExecMainStatus: nil for exit
// status 0.
func commandExitError(result, code, status any) error {
	c, _ := code.(int32)
	s, _ := status.(int32)
	switch {
	case c == 1 && s == 0 && result == "success":
		return nil
	case c == 1 && s == 0:
		// Exited 0, yet the unit failed: RuntimeMaxSec= (a "timeout").
		return fmt.Errorf("unit result %v", result)
	case c == 1 && s == 203:
		return fmt.Errorf("systemd could not execute it (status 203/EXEC; unit result %v)", result)
	case c == 1:
		return fmt.Errorf("exit status %d", s)
	case c == 2 || c == 3:
		return fmt.Errorf("killed by signal %d (unit result %v)", s, result)
	}
	return fmt.Errorf("unit result %v", result)
}

// copyOutputs reads both pipes to their end into their writers. copied is
// closed once both are done; failed has the first write that failed (output
// over its limit), which ends the run at once.
func copyOutputs(from [2]*os.File, to [2]io.Writer) (copied <-chan struct{}, failed <-chan error) {
	fail := make(chan error, 2)
	var copying sync.WaitGroup
	for i := range from {
		copying.Add(1)
		go func() {
			defer copying.Done()
			if _, err := io.Copy(to[i], from[i]); err != nil {
				fail <- err
			}
		}()
	}
	done := make(chan struct{})
	go func() { copying.Wait(); close(done) }()
	return done, fail
}
