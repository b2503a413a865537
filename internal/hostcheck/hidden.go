package hostcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// CheckPaths refuses a source path that leads into a directory the daemon's
// sandbox hides once its symlinks are resolved on this machine. config.Load
// already refuses such a path as written; this catches
// /var/lib/app/queue.db pointing to /home/app/queue.db.
func CheckPaths(c *config.Config) []config.Problem {
	var problems []config.Problem
	for _, p := range c.SortedPools() {
		key, path, ok := localFile(p.Source)
		if !ok {
			continue
		}
		clean := filepath.Clean(path)
		resolved := resolvePath(clean)
		if resolved == clean {
			continue // Load judged this very path
		}
		if _, why, hidden := config.HiddenBy(resolved); hidden {
			problems = append(problems, config.Problem{File: c.FileOf(p.Name), Key: config.PoolKey(p, "source", key),
				Msg: fmt.Sprintf("%s leads to %s, and %s", path, resolved, why)})
		}
	}
	return problems
}

// resolvePath resolves the symlinks of an absolute, cleaned path as far as
// its components exist. Unlike filepath.EvalSymlinks it does not give up at
// a missing component or a dangling link: the database may not exist yet,
// and the daemon, inside its sandbox, cannot see what a link into /tmp
// points to.
func resolvePath(path string) string {
	rest := splitPath(path)
	cur := "/"
	for hops := 0; len(rest) > 0; {
		next := filepath.Join(cur, rest[0])
		fi, err := os.Lstat(next)
		if err != nil {
			return filepath.Join(append([]string{next}, rest[1:]...)...)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur, rest = next, rest[1:]
			continue
		}
		target, err := os.Readlink(next)
		if hops++; err != nil || hops > 40 {
			return filepath.Join(append([]string{next}, rest[1:]...)...)
		}
		if !filepath.IsAbs(target) {
			// cur has no symlinks left, so ".." in the target is
			// lexical from here.
			target = filepath.Join(cur, target)
		}
		rest = append(splitPath(filepath.Clean(target)), rest[1:]...)
		cur = "/"
	}
	return cur
}

func splitPath(path string) []string {
	var parts []string
	for _, s := range strings.Split(path, "/") {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return parts
}

// hiddenFromUs reports whether dir is one this process cannot see, because
// it runs in the daemon's sandbox: /tmp and /var/tmp bound from a
// systemd-private-* directory, /home, /root or /run/user replaced by a
// tmpfs. It says no when /proc/self/mountinfo cannot be read or parsed.
// procfs parses the table, as internal/units/cpu.go does for cgroupfs.
func hiddenFromUs(dir string) bool {
	mounts, err := procfs.GetMounts()
	if err != nil {
		return false
	}
	return hiddenIn(mounts, dir)
}

// hiddenIn judges a mount table. A host rarely mounts a tmpfs right on
// /home, /root or /run/user (its /run/user/UID are mounts of their own),
// and never binds /tmp from a systemd-private-* directory. Mount points are
// compared as the kernel writes them, escapes and all: none of the hidden
// directories has a character it escapes.
func hiddenIn(mounts []*procfs.MountInfo, dir string) bool {
	hidden := false
	for _, m := range mounts {
		if m.MountPoint != dir {
			continue
		}
		// The last mount on a mount point is the one in sight.
		switch dir {
		case "/tmp", "/var/tmp":
			hidden = strings.Contains(m.Root, "/systemd-private-")
		default:
			hidden = m.FSType == "tmpfs"
		}
	}
	return hidden
}

// localFile is the file s reads on this machine (config.LocalFile), if any.
func localFile(s config.Source) (key, path string, ok bool) {
	if f, is := s.Settings.(config.LocalFile); is {
		key, path = f.LocalFile()
		return key, path, path != ""
	}
	return "", "", false
}
