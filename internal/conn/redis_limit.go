package conn

import (
	"fmt"
	"net"
	"sync"
	"syscall"
)

// go-redis allocates what a reply's header announces before a byte of the
// body has arrived: "$1073741824" is a 1 GiB slice at once, a length past
// what make accepts is a panic, and "*N", "%N", "~N", ">N" and "|N"
// allocate N slots (proto/reader.go: readStringReply, readSlice, readMap).
// Counting bytes as they arrive is therefore too late. respLimiter sits
// under go-redis's reader, on every connection a Redis makes (the sources'
// and the fleet store's, installed through Options.Dialer), parses the
// stream's type-and-length headers as they pass, and fails the read,
// closing the connection, as soon as one reply would cost more than its
// budget. go-redis sees the error before it has the header, so it never
// allocates for it.

// redisReplyBudget bounds one reply. What the sources read is counters and
// bounded pages of ids, the fleet store a plan or its members: a few KiB.
// 1 MiB leaves room for any honest reply, and bounds what a hostile server
// can make the daemon allocate per reply to a few MiB (see
// respLimiter.charge).
const redisReplyBudget = 1 << 20

// respMinElem is the fewest bytes a RESP element takes on the wire ("_\r\n"),
// so that an aggregate announcing n elements is charged 3n at once: an
// honest reply never announces more elements than it can deliver, and a
// hostile one cannot announce a slice bigger than the budget pays for.
const respMinElem = 3

// ReplyTooLargeError is a Redis reply refused for its announced or actual
// size.
type ReplyTooLargeError struct {
	What   string // what was too large: "a bulk string of 1073741824 bytes"
	Budget int64
}

func (e *ReplyTooLargeError) Error() string {
	return fmt.Sprintf("reply refused: %s, over the limit of %d bytes for one reply (a hostile or broken server?)", e.What, e.Budget)
}

// respLimiter is a net.Conn whose reads are parsed as RESP2/RESP3 replies
// and refused past a budget per reply.
type respLimiter struct {
	net.Conn
	budget int64

	mu  sync.Mutex
	err error // sticky: the connection is closed after the first refusal
	respParser
}

func newRespLimiter(c net.Conn, budget int64) net.Conn {
	l := &respLimiter{Conn: c, budget: budget, respParser: respParser{budget: budget}}
	if sc, ok := c.(syscall.Conn); ok {
		return sysRespLimiter{l, sc}
	}
	return l
}

// sysRespLimiter is a respLimiter over a plain socket, which lets go-redis's
// pool peek at an idle connection (MSG_PEEK, which consumes nothing, so the
// parser misses no byte) to find one the server closed, as it does without
// the limiter.
type sysRespLimiter struct {
	*respLimiter
	sc syscall.Conn
}

func (s sysRespLimiter) SyscallConn() (syscall.RawConn, error) { return s.sc.SyscallConn() }

func (l *respLimiter) Read(p []byte) (int, error) {
	l.mu.Lock()
	err := l.err
	l.mu.Unlock()
	if err != nil {
		return 0, err
	}
	n, rerr := l.Conn.Read(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.feed(p[:n]); err != nil {
		// None of the chunk reaches go-redis: the header that broke the
		// budget is in it, and the connection is done for anyway.
		l.err = err
		l.Conn.Close()
		return 0, err
	}
	return n, rerr
}

// respParser follows a RESP stream a chunk at a time, as far as needed to
// know each reply's announced sizes and where it ends.
type respParser struct {
	budget int64

	state int    // respType, respLine or respBody
	typ   byte   // the current line's type byte
	line  []byte // the current length line's digits, bounded
	body  int64  // bytes of a bulk body (its CRLF included) still to skip
	cost  int64  // what the current top-level reply has cost so far
	// open holds, for each aggregate being read, how many of its elements
	// are still to come; empty between top-level replies.
	open []int64
}

const (
	respType = iota
	respLine
	respBody
)

// respMaxLenLine bounds a length header ("$" and 20 digits is any int64).
const respMaxLenLine = 24

func (r *respParser) charge(n int64, what func() string) error {
	r.cost += n
	if r.cost > r.budget {
		return &ReplyTooLargeError{What: what(), Budget: r.budget}
	}
	return nil
}

func (r *respParser) feed(b []byte) error {
	for len(b) > 0 {
		switch r.state {
		case respBody:
			k := min(int64(len(b)), r.body)
			r.body -= k
			b = b[k:]
			if r.body == 0 {
				r.state = respType
				r.done()
			}
		case respType:
			r.typ, r.line, r.state = b[0], r.line[:0], respLine
			b = b[1:]
			if err := r.charge(1, r.lineTooLong); err != nil {
				return err
			}
		case respLine:
			// Every byte of a line counts: go-redis reads a line of any
			// length whole (bufio.Reader.ReadBytes).
			i := 0
			for i < len(b) && b[i] != '\n' {
				i++
			}
			end := i < len(b)
			if end {
				i++ // the '\n'
			}
			if err := r.charge(int64(i), r.lineTooLong); err != nil {
				return err
			}
			if isLenType(r.typ) {
				if len(r.line)+i > respMaxLenLine {
					return &ReplyTooLargeError{What: fmt.Sprintf("a length header of more than %d bytes", respMaxLenLine), Budget: r.budget}
				}
				r.line = append(r.line, b[:i]...)
			}
			b = b[i:]
			if end {
				r.state = respType
				if err := r.endLine(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (r *respParser) lineTooLong() string {
	return fmt.Sprintf("a %q line of more than %d bytes", r.typ, r.budget)
}

func isLenType(t byte) bool {
	switch t {
	case '$', '!', '=', '*', '~', '>', '%', '|':
		return true
	}
	return false
}

// endLine acts on a complete line: a length header opens a body or an
// aggregate; anything else is a whole element.
func (r *respParser) endLine() error {
	if !isLenType(r.typ) {
		r.done()
		return nil
	}
	digits := r.line
	if len(digits) >= 2 && digits[len(digits)-2] == '\r' {
		digits = digits[:len(digits)-2]
	}
	n, ok := parseRespLen(digits)
	if !ok || n < -1 {
		// Not a length go-redis reads either ("?" is RESP3's streamed
		// form, which it does not support): refuse rather than guess.
		return &ReplyTooLargeError{What: fmt.Sprintf("an unreadable length %q after %q", digits, r.typ), Budget: r.budget}
	}
	if n == -1 { // a RESP2 null: "$-1", "*-1"
		r.done()
		return nil
	}
	if n > r.budget { // before any arithmetic on it
		what := fmt.Sprintf("an aggregate %q of %d elements", r.typ, n)
		if r.typ == '$' || r.typ == '!' || r.typ == '=' {
			what = fmt.Sprintf("a bulk string of %d bytes", n)
		}
		if n == respHuge {
			what = fmt.Sprintf("a %q length of %d digits", r.typ, len(digits))
		}
		return &ReplyTooLargeError{What: what, Budget: r.budget}
	}
	switch r.typ {
	case '$', '!', '=':
		if err := r.charge(n+2, func() string { return fmt.Sprintf("a bulk string of %d bytes", n) }); err != nil {
			return err
		}
		r.body, r.state = n+2, respBody
		return nil
	}
	elems := n
	switch r.typ {
	case '%':
		elems = 2 * n // key and value
	case '|':
		// An attribute's pairs come before the reply they describe,
		// which is read as part of it.
		elems = 2*n + 1
	}
	if err := r.charge(respMinElem*elems, func() string { return fmt.Sprintf("an aggregate %q of %d elements", r.typ, n) }); err != nil {
		return err
	}
	if elems == 0 {
		r.done()
		return nil
	}
	r.open = append(r.open, elems)
	return nil
}

// done notes one element complete, and closes the aggregates it completes;
// the budget starts over at the end of a top-level reply.
func (r *respParser) done() {
	for len(r.open) > 0 {
		top := len(r.open) - 1
		if r.open[top]--; r.open[top] > 0 {
			return
		}
		r.open = r.open[:top]
	}
	r.cost = 0
}

// parseRespLen parses a length header's digits. A length of more than 18
// digits is returned as respHuge, which no budget allows.
func parseRespLen(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for i, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if i == 18 {
			n = respHuge
			continue
		}
		if n != respHuge {
			n = n*10 + int64(c-'0')
		}
	}
	if neg {
		return -n, true
	}
	return n, true
}

const respHuge = int64(1) << 62
