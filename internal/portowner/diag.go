package portowner

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// The parts of <linux/inet_diag.h> that golang.org/x/sys/unix leaves out.
const (
	sizeofReqV2   = 56 // struct inet_diag_req_v2
	sizeofDiagMsg = 72 // struct inet_diag_msg
	// inetDiagCgroupID is INET_DIAG_CGROUP_ID (kernel 5.7): a u64 the
	// kernel adds to every answer, unasked.
	inetDiagCgroupID = 21
	tcpListen        = 10 // TCP_LISTEN in the kernel's enum of TCP states
)

// Dump reads the listening TCP sockets, IPv4 and IPv6, of the caller's
// network namespace: one sock_diag dump per family. root is the cgroup2
// mount (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host), which
// Held and Holders resolve cgroup paths against.
func Dump(root string) (*Table, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("listening sockets: sock_diag: %w", err)
	}
	defer unix.Close(fd)
	var all []Listener
	buf := make([]byte, 64<<10)
	for seq, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		ls, err := dumpFamily(fd, family, uint32(seq+1), buf)
		if err != nil {
			return nil, fmt.Errorf("listening sockets: sock_diag (family %d): %w", family, err)
		}
		all = append(all, ls...)
	}
	return NewTable(root, all), nil
}

// dumpFamily asks for one family's listening TCP sockets and reads the
// answer to its end.
func dumpFamily(fd int, family uint8, seq uint32, buf []byte) ([]Listener, error) {
	req := make([]byte, unix.NLMSG_HDRLEN+sizeofReqV2)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], seq)
	body := req[unix.NLMSG_HDRLEN:]
	body[0], body[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(body[4:], 1<<tcpListen) // idiag_states; the socket id stays zero: all of them
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out []Listener
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		done, err := parseMessages(buf[:n], seq, &out)
		if err != nil || done {
			return out, err
		}
	}
}

// parseMessages appends the listeners of one datagram of the answer; done
// is its end (NLMSG_DONE).
func parseMessages(b []byte, seq uint32, out *[]Listener) (done bool, err error) {
	ne := binary.NativeEndian
	for len(b) >= unix.NLMSG_HDRLEN {
		n := int(ne.Uint32(b[0:]))
		typ, mseq := ne.Uint16(b[4:]), ne.Uint32(b[8:])
		if n < unix.NLMSG_HDRLEN || n > len(b) {
			return false, fmt.Errorf("malformed netlink message (length %d of %d)", n, len(b))
		}
		msg := b[unix.NLMSG_HDRLEN:n]
		b = b[min(nlmAlign(n), len(b)):]
		if mseq != seq {
			continue // an answer to another request: not ours
		}
		switch typ {
		case unix.NLMSG_DONE:
			return true, nil
		case unix.NLMSG_ERROR:
			if len(msg) >= 4 {
				if errno := int32(ne.Uint32(msg)); errno < 0 {
					return false, unix.Errno(-errno)
				}
			}
			return true, nil
		case unix.SOCK_DIAG_BY_FAMILY:
			if l, ok := parseDiagMsg(msg); ok {
				*out = append(*out, l)
			}
		}
	}
	return false, nil
}

// parseDiagMsg reads one struct inet_diag_msg and its attributes.
func parseDiagMsg(m []byte) (Listener, bool) {
	if len(m) < sizeofDiagMsg {
		return Listener{}, false
	}
	ne := binary.NativeEndian
	l := Listener{
		Port:  int(binary.BigEndian.Uint16(m[4:])), // idiag_sport, network order
		UID:   ne.Uint32(m[64:]),
		Inode: uint64(ne.Uint32(m[68:])),
	}
	switch m[0] {
	case unix.AF_INET:
		l.Addr = netip.AddrFrom4([4]byte(m[8:12]))
	case unix.AF_INET6:
		l.Addr = netip.AddrFrom16([16]byte(m[8:24]))
	default:
		return Listener{}, false
	}
	for a := m[sizeofDiagMsg:]; len(a) >= 4; {
		n, typ := int(ne.Uint16(a[0:])), ne.Uint16(a[2:])
		if n < 4 || n > len(a) {
			break
		}
		if typ == inetDiagCgroupID && n >= 12 {
			l.CgroupID = ne.Uint64(a[4:])
		}
		a = a[min(nlmAlign(n), len(a)):]
	}
	return l, true
}

func nlmAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }
