// Package control is the daemon's control interface: JSON over HTTP on a
// Unix socket (/run/flexiq-scaled/control.sock, and root.sock for root
// alone), which `flexiq-scaled status`, `explain`, `pause`, `resume`, `pin`,
// `unpin` and `roll` speak, and so can `curl --unix-socket`. Every
// connection is judged by its peer's credentials and groups as the kernel
// recorded them at connect(2) (SO_PEERCRED, SO_PEERGROUPS), never by
// anything the client says, and a peer in neither group is closed before a
// byte of its request is read (package sockguard).
package control

import (
	"fmt"
	"os/user"
	"strconv"

	"github.com/flexiq/flexiq-scaled/internal/sockguard"
)

// The groups that the package creates (sysusers.d): members of ReadGroup
// may read (status, explain), members of AdminGroup may also change
// (pause, resume, pin, unpin, roll, reload). Root may do everything. ReadGroup is
// also metrics.sock's group.
const (
	ReadGroup  = "flexiq-scaled"
	AdminGroup = "flexiq-scaled-admin"
)

// Access is what a peer may do.
type Access int

const (
	NoAccess Access = iota
	ReadAccess
	ChangeAccess
)

// Peer is the process at the other end of a connection.
type Peer = sockguard.Peer

// Authorizer decides a peer's access from its groups.
type Authorizer struct {
	// GroupID looks a group up by name; nil is NSS (os/user), cached
	// while /etc/group is unchanged. Only the groups' ids come from NSS:
	// who is a member comes from the kernel.
	GroupID func(name string) (uint32, error)
	// Owner may do everything, as root may: the daemon's own uid, which
	// is root's (0, the zero value) but for a daemon of a user's service
	// manager, whose user owns it anyway.
	Owner uint32
	// WakeOf, when set, names the pool whose wake process p is (issue 29:
	// the daemon knows it by its cgroup), ok false for any other peer.
	// That process runs as a dynamic user with no group of ours: it may
	// wake its own pool and read its ready replicas, nothing else.
	WakeOf func(p Peer) (pool string, ok bool)
}

// IsWakeProcess says whether p is pool's wake process.
func (a Authorizer) IsWakeProcess(p Peer, pool string) bool {
	if a.WakeOf == nil {
		return false
	}
	got, ok := a.WakeOf(p)
	return ok && got == pool
}

// Access is what p may do, from its primary and supplementary groups as
// the kernel gave them at connect(2). A user's groups are never looked up
// in NSS (/etc/group): the process that connected may have dropped a
// group, or be in a mount namespace with an /etc/group of its own making,
// and a process that handed the socket on and exited is judged by what it
// was. A group that does not exist grants nothing.
func (a Authorizer) Access(p Peer) Access {
	if p.UID == 0 || p.UID == a.Owner {
		return ChangeAccess
	}
	groupID := a.GroupID
	if groupID == nil {
		groupID = etcGroup.ID
	}
	if gid, err := groupID(AdminGroup); err == nil && p.InGroup(gid) {
		return ChangeAccess
	}
	if gid, err := groupID(ReadGroup); err == nil && p.InGroup(gid) {
		return ReadAccess
	}
	return NoAccess
}

// Admit refuses a peer that may do nothing, at accept: the control
// socket's and metrics.sock's sockguard.Config.Admit.
func (a Authorizer) Admit(p Peer) error {
	if a.Access(p) == NoAccess {
		if a.WakeOf != nil {
			if _, ok := a.WakeOf(p); ok {
				return nil
			}
		}
		return fmt.Errorf("permission denied: reading the daemon's state needs root or membership of group %s, changing a pool membership of group %s (uid %d is in neither)", ReadGroup, AdminGroup, p.UID)
	}
	return nil
}

// AdmitOwner refuses every peer but root and the owner: the root control
// socket's sockguard.Config.Admit.
func (a Authorizer) AdmitOwner(p Peer) error {
	if p.UID == 0 || p.UID == a.Owner {
		return nil
	}
	return fmt.Errorf("permission denied: %s is root's (uid %d is not); use %s", RootSocketName, p.UID, SocketName)
}

func lookupGroupID(name string) (uint32, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(g.Gid, 10, 32)
	return uint32(n), err
}
