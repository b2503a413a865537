package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/procfs"
)

// hiddenDir is a directory that the daemon's unit (systemd/flexiq-scaled.service)
// replaces with an empty one of its own, and why.
type hiddenDir struct {
	dir    string
	reason string
}

const (
	privateTmpReason  = "the daemon's unit has PrivateTmp=yes, so it sees its own empty %s"
	protectHomeReason = "the daemon's unit has ProtectHome=tmpfs, so it sees an empty %s"
)

var hiddenDirs = []hiddenDir{
	{"/tmp", privateTmpReason},
	{"/var/tmp", privateTmpReason},
	{"/home", protectHomeReason},
	{"/root", protectHomeReason},
	{"/run/user", protectHomeReason},
}

// hiddenBy returns the hidden directory that path (absolute, cleaned) lies in.
func hiddenBy(path string) (hiddenDir, bool) {
	for _, h := range hiddenDirs {
		if path == h.dir || strings.HasPrefix(path, h.dir+"/") {
			return h, true
		}
	}
	return hiddenDir{}, false
}

func (h hiddenDir) explain() string {
	return fmt.Sprintf(h.reason, h.dir) + "; keep the database elsewhere, e.g. under /var/lib/flexiq"
}

// CheckPaths refuses a source path that leads into a directory the daemon's
// sandbox hides once its symlinks are resolved on this machine. Load already
// refuses such a path as written; this catches /var/lib/app/queue.db
// pointing to /home/app/queue.db.
func CheckPaths(c *Config) []Problem {
	var problems []Problem
	for _, p := range sortedPools(c) {
		key, path, ok := localFile(p.Source)
		if !ok {
			continue
		}
		clean := filepath.Clean(path)
		resolved := resolvePath(clean)
		if resolved == clean {
			continue // Load judged this very path
		}
		if h, hidden := hiddenBy(resolved); hidden {
			problems = append(problems, Problem{File: c.FileOf(p.Name), Key: poolKey(p, "source", key),
				Msg: fmt.Sprintf("%s leads to %s, and %s", path, resolved, h.explain())})
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
