package units

import (
	"fmt"
	"path/filepath"
	"strings"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// Hardening presets: sets of systemd sandboxing properties for a pool's
// workers (WorkerSpec.Hardening, the config's per-pool `hardening`).
const (
	// HardeningNone sets no sandboxing property: the worker runs as a plain
	// service would, for workers that need what the others take away.
	HardeningNone = "none"
	// HardeningDefault is what an ordinary Python, Go or Node worker
	// survives: it protects the kernel and the rest of the system from the
	// worker, and leaves the worker's home, devices, namespaces and system
	// calls alone.
	HardeningDefault = "default"
	// HardeningStrict adds a read-only file system (but for /tmp and the
	// working directory), no devices, no capabilities, IP and Unix sockets
	// only, and the system calls of an ordinary service only.
	HardeningStrict = "strict"
)

// HardeningPresets lists the valid values of WorkerSpec.Hardening, besides
// "" (which means HardeningDefault).
var HardeningPresets = []string{HardeningNone, HardeningDefault, HardeningStrict}

// allowList is the (bas) of RestrictAddressFamilies and SystemCallFilter:
// Allow=true makes List an allow list (as in a unit file without "~"), false
// a deny list.
type allowList struct {
	Allow bool
	List  []string
}

// envFile is one entry of the EnvironmentFiles property, a(sb): the path,
// and whether a missing file is fine (a leading "-" in a unit file).
type envFile struct {
	Path          string
	IgnoreMissing bool
}

// ePERM is what a system call outside strict's filter returns, rather than
// systemd's default of killing the process with SIGSYS: a runtime that probes
// for a newer call (libuv's io_uring, say) falls back instead of dying.
const ePERM = 1

// hardening returns the properties of preset ("" = HardeningDefault). The
// comments name what an ordinary worker might miss, for the table in docs/workers.md.
func hardening(preset, workingDirectory string) ([]sddbus.Property, error) {
	switch preset {
	case HardeningNone:
		return nil, nil
	case "", HardeningDefault, HardeningStrict:
	default:
		return nil, fmt.Errorf("unknown hardening preset %q (want %s)", preset, strings.Join(HardeningPresets, ", "))
	}
	protectSystem := "full" // /usr, /boot, /efi and /etc read-only
	// Sockets of the families an ordinary worker uses; netlink too (it
	// lists network interfaces), but not, say, raw packet sockets.
	families := []string{"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"}
	if preset == HardeningStrict {
		protectSystem = "strict" // everything read-only but /dev, /proc, /sys and ReadWritePaths
		// glibc copes without netlink (getaddrinfo's AI_ADDRCONFIG then
		// assumes both IPv4 and IPv6).
		families = families[:3]
	}
	props := []sddbus.Property{
		// No setuid binaries, no file capabilities: sudo fails.
		prop("NoNewPrivileges", true),
		// /tmp and /var/tmp of the worker's own, emptied when it stops; the
		// workers of a pool do not share them.
		prop("PrivateTmp", true),
		prop("ProtectSystem", protectSystem),
	}
	props = append(props, protectKernel()...)
	props = append(props,
		prop("RestrictSUIDSGID", true),
		prop("RestrictRealtime", true),
		prop("LockPersonality", true),
		prop("RestrictAddressFamilies", allowList{true, families}),
		// Native system calls only: a 32-bit binary (i386 on amd64) fails.
		prop("SystemCallArchitectures", []string{"native"}),
		// Not MemoryDenyWriteExecute: JITs (Node's V8, PyPy, LuaJIT, the
		// JVM) need writable and executable memory. Not RestrictNamespaces:
		// headless Chromium (PDF rendering, scraping) sandboxes itself with
		// user namespaces. Not RemoveIPC: the workers of a pool share a
		// user, and one stopping would remove the others' IPC objects.
		// Not ProtectHome nor PrivateDevices: an application may live
		// under /home, and use a GPU.
	)
	if preset != HardeningStrict {
		return props, nil
	}
	props = append(props,
		// Home directories read-only, not hidden: an application or its
		// virtualenv may live under /home.
		prop("ProtectHome", "read-only"),
		prop("PrivateDevices", true), // /dev/null, zero, random and the like only
		prop("PrivateIPC", true),
		prop("ProtectProc", "invisible"), // other users' processes are not in /proc
		prop("CapabilityBoundingSet", uint64(0)),
		prop("RestrictNamespaces", uint64(0)), // the set of namespace types allowed: none
		prop("SystemCallFilter", allowList{true, []string{"@system-service"}}),
		prop("SystemCallErrorNumber", int32(ePERM)),
		prop("UMask", uint32(0o027)),
	)
	if workingDirectory != "" {
		// A worker's own files (caches, reports, a local database) belong
		// in its working directory, which therefore stays writable.
		props = append(props, prop("ReadWritePaths", []string{workingDirectory}))
	}
	return props, nil
}

// environmentFiles is the EnvironmentFiles property's value. A leading "-"
// means a missing file is ignored, as in a unit file.
func environmentFiles(paths []string) ([]envFile, error) {
	files := make([]envFile, 0, len(paths))
	for _, p := range paths {
		path, ignore := strings.CutPrefix(p, "-")
		if !filepath.IsAbs(path) || filepath.Clean(path) != path {
			return nil, fmt.Errorf("environment file %q: must be an absolute, normalized path", p)
		}
		files = append(files, envFile{Path: path, IgnoreMissing: ignore})
	}
	return files, nil
}

// protectKernel keeps the kernel and the host's identity out of a unit's
// reach: /proc/sys and /sys read-only (tunables), no module loading, no
// kernel log, /sys/fs/cgroup read-only, no clock or hostname changes. The
// workers' presets, the command runner's units and the wake process's
// share it.
func protectKernel() []sddbus.Property {
	return []sddbus.Property{
		prop("ProtectKernelTunables", true),
		prop("ProtectKernelModules", true),
		prop("ProtectKernelLogs", true),
		prop("ProtectControlGroups", true),
		prop("ProtectClock", true),
		prop("ProtectHostname", true),
	}
}
