package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// findCgroup2 returns where the host mounts the cgroup2 hierarchy: at
// /sys/fs/cgroup on a unified host, elsewhere (e.g. /sys/fs/cgroup/unified)
// on a hybrid one.
func findCgroup2() (string, error) {
	mounts, err := procfs.GetMounts()
	if err != nil {
		return "", err
	}
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			return m.MountPoint, nil
		}
	}
	return "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
}

// ownCgroup2 is this process's cgroup2 path, relative to the hierarchy root.
func ownCgroup2() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest, nil
		}
	}
	return "", errors.New("no cgroup2 entry in /proc/self/cgroup")
}

// cgroupPath is the sandbox's child cgroup, below the cgroup the keeper was
// started in. Nothing else of the host's tree is touched. (On a host where
// systemd is PID 1, the polite place would be a delegated scope,
// `systemd-run --scope -p Delegate=yes`; the keeper does not make one yet,
// and the child lands below the caller's own cgroup.)
func cgroupPath(name string) (string, error) {
	mnt, err := findCgroup2()
	if err != nil {
		return "", err
	}
	own, err := ownCgroup2()
	if err != nil {
		return "", err
	}
	return filepath.Join(mnt, own, "flexiq-sandbox-"+name), nil
}

// removeCgroup removes a cgroup and every cgroup below it, deepest first. The
// processes of a dying sandbox take a moment to be reaped, so an EBUSY is
// retried until ctx ends.
func removeCgroup(ctx context.Context, dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("walking cgroup %s: %w", dir, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		for {
			err := os.Remove(dirs[i])
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("removing cgroup %s: %w", dirs[i], err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}
