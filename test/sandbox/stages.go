package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
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
