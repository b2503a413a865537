// Package control is the daemon's control interface: JSON over HTTP on a
// Unix socket (/run/flexiq-scaled/control.sock), which `flexiq-scaled
// status`, `explain`, `pause`, `resume`, `pin`, `unpin` and `roll` speak,
// and so can `curl --unix-socket`. Every request is authorised by the
// peer's credentials as the kernel reports them (SO_PEERCRED), never by
// anything the client says.
package control

import (
	"bufio"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
)

// The groups that the package creates (sysusers.d): members of ReadGroup
// may read (status, explain), members of AdminGroup may also change
// (pause, resume, pin, unpin, roll). Root may do everything.
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

// Peer is the process at the other end of a connection, from SO_PEERCRED.
type Peer struct {
	PID      int32
	UID, GID uint32
}

// String names the peer for the journal: "uid 1000 (alice), pid 4242".
func (p Peer) String() string {
	name := ""
	if u, err := user.LookupId(strconv.FormatUint(uint64(p.UID), 10)); err == nil {
		name = " (" + u.Username + ")"
	}
	return fmt.Sprintf("uid %d%s, pid %d", p.UID, name, p.PID)
}

// Authorizer decides a peer's access from its groups.
type Authorizer struct {
	// GroupID looks a group up by name; nil is NSS (os/user).
	GroupID func(name string) (uint32, error)
	// Groups lists the groups of a peer: its primary group, and its
	// supplementary groups. nil is peerGroups.
	Groups func(p Peer) ([]uint32, error)
}

// Access is what p may do. A group that does not exist grants nothing; a
// failing lookup grants nothing either (and says why).
func (a Authorizer) Access(p Peer) (Access, error) {
	if p.UID == 0 {
		return ChangeAccess, nil
	}
	groupID, groups := a.GroupID, a.Groups
	if groupID == nil {
		groupID = lookupGroupID
	}
	if groups == nil {
		groups = peerGroups
	}
	gids, err := groups(p)
	if err != nil {
		return NoAccess, err
	}
	gids = append(gids, p.GID)
	if gid, err := groupID(AdminGroup); err == nil && slices.Contains(gids, gid) {
		return ChangeAccess, nil
	}
	if gid, err := groupID(ReadGroup); err == nil && slices.Contains(gids, gid) {
		return ReadAccess, nil
	}
	return NoAccess, nil
}

func lookupGroupID(name string) (uint32, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(g.Gid, 10, 32)
	return uint32(n), err
}

// peerGroups lists a peer's groups: the process's own, from the Groups: line
// of /proc/PID/status, where the daemon can see it (it reflects setgroups,
// newgrp and setpriv, as the kernel checks them); else, as under the shipped
// unit's ProtectProc=invisible, which hides other users' processes, the
// user's groups from NSS (/etc/group), as at login.
func peerGroups(p Peer) ([]uint32, error) {
	if gids, ok := procGroups(fmt.Sprintf("/proc/%d/status", p.PID), p.UID); ok {
		return gids, nil
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(p.UID), 10))
	if err != nil {
		// A uid with no passwd entry has only the groups SO_PEERCRED
		// named.
		return nil, nil
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("groups of %s: %w", u.Username, err)
	}
	var gids []uint32
	for _, s := range ids {
		if n, err := strconv.ParseUint(s, 10, 32); err == nil {
			gids = append(gids, uint32(n))
		}
	}
	return gids, nil
}

// procGroups reads the Groups: line of a /proc/PID/status, if the file is
// the peer's still (same real uid: the PID may have been reused).
func procGroups(path string, uid uint32) ([]uint32, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	var gids []uint32
	sameUID, seen := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		switch k {
		case "Uid":
			sameUID = len(fields) > 0 && fields[0] == strconv.FormatUint(uint64(uid), 10)
		case "Groups":
			seen = true
			for _, s := range fields {
				if n, err := strconv.ParseUint(s, 10, 32); err == nil {
					gids = append(gids, uint32(n))
				}
			}
		}
	}
	return gids, seen && sameUID
}
