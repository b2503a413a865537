package sandbox

// The init stage: PID 1 of the sandbox's namespaces until it execs systemd.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

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
	for _, s := range rootfsSteps(spec) {
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.desc, err)
		}
	}
	env := []string{"container=flexiq-sandbox", "TERM=dumb"}
	// systemd's own messages (unit start/stop, watchdog timeouts, kills) go
	// to the sandbox's journal, where tests read them.
	return unix.Exec(systemdBinary, []string{systemdBinary, "--show-status=0"}, env)
}

// rootfsStep is one step of building the root filesystem; desc prefixes
// its error.
type rootfsStep struct {
	desc string
	fn   func() error
}

// rootfsSteps build the sandbox's root filesystem in order, on a tmpfs in
// the state directory, and end in it.
func rootfsSteps(spec initSpec) []rootfsStep {
	base := filepath.Join(stateDir(spec.Name), "mnt")
	root := filepath.Join(base, "root")
	return []rootfsStep{
		{"scratch tmpfs", func() error {
			if err := os.MkdirAll(base, 0o700); err != nil {
				return err
			}
			return unix.Mount("tmpfs", base, "tmpfs", 0, "mode=0700")
		}},
		{"overlay", func() error { return mountOverlay(base, root) }},
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
		{"binds", func() error { return bindAll(root, spec.Binds) }},
		{"masks", func() error { return maskUnits(root + "/etc/systemd/system") }},
		{"policy-rc.d", func() error { return removePolicyRcD(root) }},
		{"machine-id", func() error { return writeMachineID(root) }},
		// systemd sets the hostname from /etc/hostname at boot.
		{"hostname", func() error {
			if err := os.WriteFile(root+"/etc/hostname", []byte(spec.Name+"\n"), 0o644); err != nil {
				return err
			}
			return unix.Sethostname([]byte(spec.Name))
		}},
		{"pivot_root", func() error { return pivotInto(root) }},
	}
}

// mountOverlay mounts the host's root filesystem at root, every write
// landing in base's upper directory, on the tmpfs.
func mountOverlay(base, root string) error {
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			return err
		}
	}
	// lowerdir=/ shows the host's root filesystem only (not its other
	// mounts); every write lands in upperdir, on the tmpfs.
	opts := fmt.Sprintf("lowerdir=/,upperdir=%s/upper,workdir=%s/work", base, base)
	return unix.Mount("overlay", root, "overlay", 0, opts)
}

// bindAll bind-mounts Options.Binds into root.
func bindAll(root string, binds []string) error {
	for _, b := range binds {
		src, dst := splitBind(b)
		if err := os.MkdirAll(root+dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(src, root+dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
	}
	return nil
}

// maskUnits masks maskedUnits and keeps notAtBoot from starting at boot,
// in dir, the sandbox's /etc/systemd/system.
func maskUnits(dir string) error {
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
}

// removePolicyRcD removes a container image's policy-rc.d (Docker's exits
// 101), which forbids maintainer scripts to start services. The sandbox is
// a booted system, where dpkg -i should start what it installs.
func removePolicyRcD(root string) error {
	err := os.Remove(root + "/usr/sbin/policy-rc.d")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// writeMachineID gives the sandbox its own machine ID, so that journals and
// D-Bus never mistake it for the host.
func writeMachineID(root string) error {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	return os.WriteFile(root+"/etc/machine-id", []byte(hex.EncodeToString(id)+"\n"), 0o444)
}

// pivotInto makes root the namespace's root and drops the host's tree.
func pivotInto(root string) error {
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
}
