package sockguard

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound what the peers of one socket may hold and send.
type Limits struct {
	// PerUID is how many connections one uid may hold at once. Root's
	// count too, but root's connections count against its own cap only.
	PerUID int
	// Total is how many connections every uid but root may hold at once
	// together: whoever fills it, root keeps its PerUID.
	Total int
	// MaxHeaderBytes bounds a request's headers (net/http allows 4 KiB
	// more before it answers 431).
	MaxHeaderBytes int
	// ReadHeaderTimeout closes a peer that trickles its headers;
	// ReadTimeout one that trickles its body; IdleTimeout a kept-alive
	// connection with no request.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// DefaultLimits are the control and metrics sockets' (docs/security.md).
// 16 connections per uid is four times what the busiest honest peer needs
// (a script running status in a loop, or Prometheus through the proxy);
// 128 in all keeps the worst case, with root's 16 besides, at 144
// descriptors and some 30 KiB of buffers each per socket, far below the
// daemon's file limit and MemoryMax=.
var DefaultLimits = Limits{
	PerUID:            16,
	Total:             128,
	MaxHeaderBytes:    8 << 10,
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       10 * time.Second,
	WriteTimeout:      15 * time.Second,
	IdleTimeout:       30 * time.Second,
}

// Config is one socket's guard.
type Config struct {
	// Name is the socket for the journal ("control socket").
	Name string
	Limits
	// Admit says whether a peer may use the socket at all; its error is
	// the refusal, sent to the peer as a 403 before the connection is
	// closed. nil admits every peer (the file's mode decides).
	Admit func(Peer) error
	// Logf reports refusals, at most one line per logEvery.
	Logf func(format string, args ...any)
	// PeerOf reads a connection's peer; nil is the kernel's (PeerOf).
	// Tests set it to play peers they cannot be.
	PeerOf func(net.Conn) (Peer, error)
}

// logEvery bounds the journal lines that refusals cost: a flood of
// refused connections must not become a flood of log lines.
const logEvery = 10 * time.Second

// refuseWrite bounds the one write to a refused peer. A fresh connection's
// send buffer is empty, so the write never waits in practice; the bound
// keeps the accept loop from ever doing so.
const refuseWrite = 50 * time.Millisecond

// Listener is a net.Listener whose Accept judges every connection before
// anything reads from it: the peer's credentials from the kernel, Admit,
// and the caps. A connection it refuses gets one short HTTP answer and is
// closed at once, so it holds no descriptor, buffer or goroutine. Accepted
// connections carry their Peer, for ConnContext.
type Listener struct {
	net.Listener
	cfg Config

	mu      sync.Mutex
	perUID  map[uint32]int
	total   int // all but root's
	lastLog time.Time
	quiet   int // refusals not logged since lastLog
}

// Listener wraps l.
func (cfg Config) Listener(l net.Listener) *Listener {
	return &Listener{Listener: l, cfg: cfg, perUID: map[uint32]int{}}
}

// Accept returns the next connection that passes, refusing the others.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peerOf := l.cfg.PeerOf
		if peerOf == nil {
			peerOf = PeerOf
		}
		p, err := peerOf(c)
		if err != nil {
			l.refuse(c, nil, http.StatusForbidden, fmt.Sprintf("permission denied: the peer's credentials are unknown (%v)", err))
			continue
		}
		if l.cfg.Admit != nil {
			if err := l.cfg.Admit(p); err != nil {
				l.refuse(c, &p, http.StatusForbidden, err.Error())
				continue
			}
		}
		if why := l.take(p.UID); why != "" {
			l.refuse(c, &p, http.StatusServiceUnavailable, why)
			continue
		}
		return &conn{Conn: c, peer: p, l: l}, nil
	}
}

// take counts a connection of uid in, or says which cap refuses it.
func (l *Listener) take(uid uint32) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perUID[uid] >= l.cfg.PerUID {
		return fmt.Sprintf("too many connections: uid %d holds %d, the most one user may (try again when one ends)", uid, l.cfg.PerUID)
	}
	if uid != 0 && l.total >= l.cfg.Total {
		return fmt.Sprintf("too many connections: %d are open, the most this socket serves at once besides root's (try again later)", l.cfg.Total)
	}
	l.perUID[uid]++
	if uid != 0 {
		l.total++
	}
	return ""
}

func (l *Listener) release(uid uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perUID[uid]--; l.perUID[uid] <= 0 {
		delete(l.perUID, uid)
	}
	if uid != 0 {
		l.total--
	}
}

// Held is how many accepted connections are open: all, and root's.
func (l *Listener) Held() (all, root int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total + l.perUID[0], l.perUID[0]
}

// refuse answers a refused peer with code and why, without reading its
// request, and closes the connection.
func (l *Listener) refuse(c net.Conn, p *Peer, code int, why string) {
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{why})
	c.SetWriteDeadline(time.Now().Add(refuseWrite))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		code, http.StatusText(code), len(body)+1, body)
	c.Close()
	l.logRefusal(p, why)
}

func (l *Listener) logRefusal(p *Peer, why string) {
	if l.cfg.Logf == nil {
		return
	}
	l.mu.Lock()
	now := time.Now()
	if !l.lastLog.IsZero() && now.Sub(l.lastLog) < logEvery {
		l.quiet++
		l.mu.Unlock()
		return
	}
	quiet, since := l.quiet, now.Sub(l.lastLog)
	l.lastLog, l.quiet = now, 0
	l.mu.Unlock()
	who := "a peer"
	if p != nil {
		who = p.String()
	}
	more := ""
	if quiet > 0 {
		more = fmt.Sprintf(" (and %d more refused in the last %.0f s)", quiet, since.Seconds())
	}
	l.cfg.Logf("%s: refused a connection from %s: %s%s", l.cfg.Name, who, why, more)
}

// conn is an accepted connection: it carries its peer and gives its slot
// back when closed.
type conn struct {
	net.Conn
	peer Peer
	l    *Listener
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() { c.l.release(c.peer.UID) })
	return c.Conn.Close()
}
