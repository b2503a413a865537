package wake

import (
	"context"
	"io"
	"net"
)

// forward hands c to one of addrs, tried in turn from the next in the
// round robin, writing head (bytes already read from c) first. It reports
// false when every replica refused, leaving c untouched.
func (h *Holder) forward(ctx context.Context, c net.Conn, head []byte, addrs []string) bool {
	h.mu.Lock()
	start := h.rr
	h.rr++
	h.mu.Unlock()
	d := net.Dialer{Timeout: h.cfg.DialTimeout}
	for i := range addrs {
		addr := addrs[(start+uint64(i))%uint64(len(addrs))]
		up, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			h.counters.dialErrors.Add(1)
			h.cfg.Logger.Warn("wake: dialling a ready replica", "addr", addr, "err", err)
			continue
		}
		if h.cfg.Mode == ModeHold {
			h.counters.heldNow.Add(-1)
		}
		h.counters.forwarded.Add(1)
		h.counters.forwardingNow.Add(1)
		defer h.counters.forwardingNow.Add(-1)
		pipe(c, up, head)
		return true
	}
	return false
}

// pipe copies c to up and up to c until both directions end. A direction
// that reads EOF half-closes its destination, so that a client that shuts
// its writing side still gets its answer; an error in either closes both.
// io.Copy between TCP connections splices on Linux.
func pipe(c, up net.Conn, head []byte) {
	defer up.Close()
	defer c.Close()
	if len(head) > 0 {
		if _, err := up.Write(head); err != nil {
			return
		}
	}
	errc := make(chan error, 1)
	go func() {
		_, err := io.Copy(up, c)
		if err == nil {
			closeWrite(up)
		} else {
			_ = c.Close()
			_ = up.Close()
		}
		errc <- err
	}()
	_, err := io.Copy(c, up)
	if err == nil {
		closeWrite(c)
	} else {
		_ = c.Close()
		_ = up.Close()
	}
	<-errc
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = c.Close()
	}
}
