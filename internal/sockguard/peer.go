// Package sockguard serves HTTP on the daemon's local Unix sockets
// (control.sock, metrics.sock) so that no local user can starve them: the
// peer's credentials are taken from the kernel when a connection is
// accepted, a peer that may not use the socket is closed before a byte of
// its request is read, every peer has a cap on the connections it may hold,
// and headers are small and timed. One mechanism for both sockets.
package sockguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/user"
	"slices"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Peer is the process at the other end of a connection, as the kernel
// recorded it when the process called connect(2): SO_PEERCRED and
// SO_PEERGROUPS. These stay the connecting process's even if it hands the
// socket to another process and exits, and no file the peer can influence
// (NSS, /proc) is consulted afterwards.
type Peer struct {
	PID      int32
	UID, GID uint32
	// Groups are the supplementary groups (SO_PEERGROUPS); GID is not
	// among them unless the process added it.
	Groups []uint32
}

// String names the peer for the journal: "uid 1000 (alice), pid 4242".
func (p Peer) String() string {
	name := ""
	if u, err := user.LookupId(strconv.FormatUint(uint64(p.UID), 10)); err == nil {
		name = " (" + u.Username + ")"
	}
	return fmt.Sprintf("uid %d%s, pid %d", p.UID, name, p.PID)
}

// InGroup says whether gid is the peer's primary or a supplementary group.
func (p Peer) InGroup(gid uint32) bool {
	return p.GID == gid || slices.Contains(p.Groups, gid)
}

type peerKey struct{}

// WithPeer returns ctx carrying the peer, as the server's ConnContext does.
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerFrom is the peer that ctx carries, if any.
func PeerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// maxGroups is the kernel's NGROUPS_MAX.
const maxGroups = 65536

// PeerOf reads a Unix connection's peer credentials and supplementary
// groups. An error (not a Unix socket, or a kernel without SO_PEERGROUPS,
// before 4.13) means the peer cannot be judged: the caller refuses it.
func PeerOf(c net.Conn) (Peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Peer{}, errors.New("not a Unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var (
		p    Peer
		serr error
	)
	if err := raw.Control(func(fd uintptr) {
		var cred *unix.Ucred
		if cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); serr != nil {
			serr = fmt.Errorf("SO_PEERCRED: %w", serr)
			return
		}
		p = Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}
		if p.Groups, serr = peerGroups(int(fd)); serr != nil {
			serr = fmt.Errorf("SO_PEERGROUPS: %w", serr)
		}
	}); err != nil {
		return Peer{}, err
	}
	return p, serr
}

// peerGroups reads SO_PEERGROUPS, which x/sys/unix has no wrapper for: an
// array of gid_t, whose size the kernel tells with ERANGE when the buffer
// is too small.
func peerGroups(fd int) ([]uint32, error) {
	buf := make([]uint32, 32)
	for {
		size := uint32(len(buf) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		switch {
		case errno == unix.ERANGE && int(size/4) > len(buf) && size/4 <= maxGroups:
			buf = make([]uint32, size/4)
			continue
		case errno != 0:
			return nil, errno
		}
		return buf[: size/4 : size/4], nil
	}
}
