package config

import (
	"fmt"
	"strings"
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

// HiddenBy returns the directory of the daemon's sandbox that path
// (absolute, cleaned) lies in, and the explanation a message gives: for the
// checks of paths resolved on this machine (internal/hostcheck).
func HiddenBy(path string) (dir, why string, ok bool) {
	h, ok := hiddenBy(path)
	return h.dir, h.explain(), ok
}
