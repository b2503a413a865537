package control

import (
	"os"
	"sync"
	"syscall"
)

// groupCache remembers the groups' ids between connections for as long as
// the group file is unchanged. Every connection to control.sock is judged
// by up to two group lookups (AdminGroup, ReadGroup), and the static,
// cgo-less binary's os/user reads and scans /etc/group for each: some
// 65 µs a lookup, which bounded how fast the daemon could refuse a flood of
// connections, and so how long an admin's request waited behind them in
// the socket's queue. A stat of the file replaces both.
type groupCache struct {
	path   string
	lookup func(name string) (uint32, error)

	mu  sync.Mutex
	key fileKey
	ids map[string]groupID
}

type groupID struct {
	id  uint32
	err error // a group that does not exist grants nothing, as before
}

// fileKey changes whenever the file is replaced (groupadd, usermod and
// vigr write a new file and rename it over the old one) or rewritten in
// place.
type fileKey struct {
	dev, ino, size   uint64
	mtimeNs, ctimeNs int64
}

func statKey(path string) (fileKey, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileKey{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{
		dev: uint64(st.Dev), ino: st.Ino, size: uint64(st.Size),
		mtimeNs: st.Mtim.Nano(), ctimeNs: st.Ctim.Nano(),
	}, true
}

// ID is name's group id, looked up again only when the file changed. A
// file that cannot be read is never cached: each call looks up.
func (c *groupCache) ID(name string) (uint32, error) {
	key, ok := statKey(c.path)
	if !ok {
		return c.lookup(name)
	}
	c.mu.Lock()
	if key != c.key || c.ids == nil {
		c.key, c.ids = key, map[string]groupID{}
	}
	g, hit := c.ids[name]
	c.mu.Unlock()
	if hit {
		return g.id, g.err
	}
	id, err := c.lookup(name)
	c.mu.Lock()
	if c.key == key {
		c.ids[name] = groupID{id, err}
	}
	c.mu.Unlock()
	return id, err
}

// etcGroup is the cache behind an Authorizer without its own GroupID: the
// file os/user reads when the binary has no cgo, as this one has not.
var etcGroup = &groupCache{path: "/etc/group", lookup: lookupGroupID}
