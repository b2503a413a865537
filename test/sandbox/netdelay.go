package sandbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A kernel without netem (this project's CI VMs have none) can still delay
// a link: an iptables rule in the sandbox's own namespace hands every
// packet that arrives on its link to an NFQUEUE, and this process gives
// each one back (accepts it) d after it arrived, in order. That is netem's
// delay on one direction, in user space: the sandbox's round trips grow by
// d, TCP retransmits as it would, and nothing on the host is touched (the
// rule and the queue live in the sandbox's namespace and go with it).
//
// The netlink messages are nfnetlink_queue's (linux/netfilter/
// nfnetlink_queue.h); no Go library for them is served here, and the four
// messages this needs are short.

const (
	nfnlSubsysQueue   = 3
	nfqnlMsgPacket    = 0
	nfqnlMsgVerdict   = 1
	nfqnlMsgConfig    = 2
	nfqaPacketHdr     = 1
	nfqaVerdictHdr    = 2
	nfqaCfgCmd        = 1
	nfqaCfgParams     = 2
	nfqaCfgQueueMaxln = 3
	nfqaCfgMask       = 4
	nfqaCfgFlags      = 5
	nfqnlCfgCmdBind   = 1
	nfqnlCopyMeta     = 1
	nfqaCfgFFailOpen  = 1
	nfAccept          = 1
	// delayQueueNum is the queue's number in the sandbox's namespace (its
	// own; any number would do).
	delayQueueNum = 7
	// delayQueueLen is how many packets the kernel holds for us; past it
	// (fail-open) packets pass undelayed rather than being dropped.
	delayQueueLen = 1 << 16
)

// errNoQueue says the NFQUEUE rule cannot be made: no iptables, or a
// kernel without the NFQUEUE target. Other failures are the code's.
var errNoQueue = errors.New("no NFQUEUE")

// delayRule is the iptables rule, as arguments after -I/-D.
var delayRule = []string{"INPUT", "-i", InsideLink, "-j", "NFQUEUE", "--queue-num", strconv.Itoa(delayQueueNum)}

// linkDelay is one sandbox's delayed link.
type linkDelay struct {
	fd   int
	d    time.Duration
	due  chan heldPacket
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex // serialises writes on fd
	seq  uint32
}

type heldPacket struct {
	id uint32
	at time.Time
}

// startQueueDelay delays every packet that reaches the sandbox by d.
func (s *Sandbox) startQueueDelay(ctx context.Context, d time.Duration) (*linkDelay, error) {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, fmt.Errorf("%w: iptables (Debian package iptables) is missing: %v", errNoQueue, err)
	}
	var fd int
	err := InNetns(s.PID, func() (err error) {
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlink socket in the sandbox's namespace: %w", err)
	}
	l := &linkDelay{fd: fd, d: d, due: make(chan heldPacket, delayQueueLen), done: make(chan struct{})}
	if err := l.bind(); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nfqueue: %w", err)
	}
	if err := s.iptables(ctx, "-I", delayRule...); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %v", errNoQueue, err)
	}
	// receive wakes every 200 ms to see whether it should stop.
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nfqueue: %w", err)
	}
	l.wg.Add(2)
	go l.receive()
	go l.release()
	return l, nil
}

// stop removes the rule, gives back every held packet at once and closes
// the queue.
func (l *linkDelay) stop(ctx context.Context, s *Sandbox) error {
	err := s.iptables(ctx, "-D", delayRule...)
	close(l.done)
	// receive sees done within its receive timeout.
	l.wg.Wait()
	unix.Close(l.fd)
	return err
}

func (s *Sandbox) iptables(ctx context.Context, op string, rule ...string) error {
	argv := append([]string{"nsenter", "-t", strconv.Itoa(s.PID), "-n", "iptables", "-w", op}, rule...)
	return run(ctx, argv...)
}

// InNetns runs f on a thread in the network namespace of pid (a
// sandbox's PID: the host has no address on the sandboxes' net). Sockets
// f makes stay in that namespace for their life, wherever they are used.
// The thread is never unlocked, so the runtime ends it with the goroutine
// rather than hand a thread in another namespace to other goroutines.
func InNetns(pid int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns into the network namespace of %d: %w", pid, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// bind takes queue delayQueueNum, metadata only, fail-open when full.
func (l *linkDelay) bind() error {
	if err := unix.Bind(l.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	_ = unix.SetsockoptInt(l.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, unix.AF_INET}
	params := binary.BigEndian.AppendUint32(nil, 0xffff)
	params = append(params, nfqnlCopyMeta)
	flags := binary.BigEndian.AppendUint32(nil, nfqaCfgFFailOpen)
	for _, attrs := range [][]byte{
		attr(nfqaCfgCmd, cmd),
		append(attr(nfqaCfgParams, params), attr(nfqaCfgQueueMaxln, binary.BigEndian.AppendUint32(nil, delayQueueLen))...),
		append(attr(nfqaCfgFlags, flags), attr(nfqaCfgMask, flags)...),
	} {
		if err := l.request(nfqnlMsgConfig, attrs); err != nil {
			return err
		}
	}
	return nil
}

// request sends a config message and waits for the kernel's ack.
func (l *linkDelay) request(msg uint16, attrs []byte) error {
	seq, err := l.send(msg, unix.NLM_F_ACK, attrs)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(l.fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq || m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
				continue
			}
			if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
				return syscall.Errno(-errno)
			}
			return nil
		}
	}
}

func (l *linkDelay) send(msg uint16, flags uint16, attrs []byte) (uint32, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	b := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+4+len(attrs))
	binary.NativeEndian.PutUint32(b[0:], uint32(unix.NLMSG_HDRLEN+4+len(attrs)))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|msg)
	binary.NativeEndian.PutUint16(b[6:], unix.NLM_F_REQUEST|flags)
	binary.NativeEndian.PutUint32(b[8:], l.seq)
	// nfgenmsg: family, version, the queue's number (big-endian).
	b = append(b, unix.AF_UNSPEC, 0)
	b = binary.BigEndian.AppendUint16(b, delayQueueNum)
	b = append(b, attrs...)
	return l.seq, unix.Sendto(l.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// attr encodes one netlink attribute, padded to 4 bytes.
func attr(typ uint16, payload []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(4+len(payload)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// receive notes each queued packet's id and arrival.
func (l *linkDelay) receive() {
	defer l.wg.Done()
	defer close(l.due)
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(l.fd, buf, 0)
		select {
		case <-l.done:
			return
		default:
		}
		if err != nil {
			if err == unix.EINTR || err == unix.EAGAIN || err == unix.ENOBUFS {
				continue
			}
			return
		}
		now := time.Now()
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			if m.Header.Type != nfnlSubsysQueue<<8|nfqnlMsgPacket || len(m.Data) < 4 {
				continue
			}
			if id, ok := packetID(m.Data[4:]); ok {
				l.due <- heldPacket{id: id, at: now}
			}
		}
	}
}

// packetID finds NFQA_PACKET_HDR's packet_id among a packet's attributes.
func packetID(b []byte) (uint32, bool) {
	for len(b) >= 4 {
		n := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) &^ unix.NLA_F_NESTED
		if n < 4 || n > len(b) {
			return 0, false
		}
		if typ == nfqaPacketHdr && n >= 8 {
			return binary.BigEndian.Uint32(b[4:]), true
		}
		b = b[min((n+3)&^3, len(b)):]
	}
	return 0, false
}

// release accepts each packet d after it arrived; once stopped, at once.
func (l *linkDelay) release() {
	defer l.wg.Done()
	for p := range l.due {
		select {
		case <-time.After(time.Until(p.at.Add(l.d))):
		case <-l.done:
		}
		v := binary.BigEndian.AppendUint32(nil, nfAccept)
		v = binary.BigEndian.AppendUint32(v, p.id)
		_, _ = l.send(nfqnlMsgVerdict, 0, attr(nfqaVerdictHdr, v))
	}
}
