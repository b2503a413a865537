package wake

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"time"
)

// headLimit bounds what is read of a request before answering it 503.
const headLimit = 16 << 10

var methods = [][]byte{
	[]byte("GET "), []byte("HEAD "), []byte("POST "), []byte("PUT "), []byte("DELETE "),
	[]byte("CONNECT "), []byte("OPTIONS "), []byte("TRACE "), []byte("PATCH "),
}

// looksHTTP1 says whether b, a connection's first bytes, begin an HTTP/1.x
// request: a known method, and once the request line is complete, an
// HTTP/1.0 or HTTP/1.1 version. HTTP/2's preface ("PRI * HTTP/2.0") and
// anything else are not: they are closed, not answered in a protocol they
// do not speak.
func looksHTTP1(b []byte) bool {
	line, _, complete := bytes.Cut(b, []byte("\n"))
	known := false
	for _, m := range methods {
		if bytes.HasPrefix(line, m) {
			known = true
			break
		}
	}
	if !known {
		return false
	}
	if !complete {
		return true
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	return bytes.HasSuffix(line, []byte(" HTTP/1.1")) || bytes.HasSuffix(line, []byte(" HTTP/1.0"))
}

// couldBeHTTP1 says whether more bytes could still make b an HTTP/1.x
// request, so that reading a head stops at once for other protocols.
func couldBeHTTP1(b []byte) bool {
	if looksHTTP1(b) {
		return true
	}
	if bytes.IndexByte(b, ' ') >= 0 {
		return false
	}
	for _, m := range methods {
		if bytes.HasPrefix(m, b) {
			return true
		}
	}
	return false
}

// readHead reads a connection's first bytes, up to the end of an HTTP
// head, headLimit, the first sign of another protocol or the timeout.
// What it returns must be replayed if the connection is forwarded.
func readHead(c net.Conn, buf []byte, timeout time.Duration) []byte {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	if buf == nil {
		buf = make([]byte, 0, 4096)
	}
	for len(buf) < headLimit && !bytes.Contains(buf, []byte("\r\n\r\n")) && couldBeHTTP1(buf) {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			break
		}
	}
	return buf
}

// response503 is the answer to a request no replica can take yet. A
// response to HEAD has no body.
func response503(retryAfter time.Duration, head bool) []byte {
	secs := int((retryAfter + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	body := fmt.Sprintf("the service is starting; retry after %d s\n", secs)
	resp := fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nRetry-After: %d\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"+
		"Cache-Control: no-store\r\nConnection: close\r\n\r\n", secs, len(body))
	if !head {
		resp += body
	}
	return []byte(resp)
}

// drainTime bounds how long a refused connection is read after its answer.
const drainTime = time.Second

// refuse ends a connection that no replica will take: an HTTP/1.x request
// (seen in head, completed from the connection) is answered 503 with
// Retry-After, anything else is closed. It reads before it answers and
// after, so that closing with unread bytes does not reset the connection
// and lose the answer.
func (h *Holder) refuse(c net.Conn, head []byte) {
	head = readHead(c, head, h.cfg.FirstBytesTimeout)
	if !looksHTTP1(head) {
		h.counters.closed.Add(1)
		_ = c.Close()
		return
	}
	h.counters.rejected.Add(1)
	_ = c.SetWriteDeadline(time.Now().Add(h.cfg.FirstBytesTimeout))
	_, _ = c.Write(response503(h.cfg.RetryAfter, bytes.HasPrefix(head, []byte("HEAD "))))
	closeWrite(c)
	_ = c.SetReadDeadline(time.Now().Add(drainTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	_ = c.Close()
}
