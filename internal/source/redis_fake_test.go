package source

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeRedis is a RESP server on a loopback port, in the test's process,
// that answers each command with what reply says: raw RESP, written as is,
// then, when stream is set, stream's bytes over and over until n bytes are
// written or the client goes. It stands for a hostile or broken server.
type fakeRedis struct {
	t     *testing.T
	ln    net.Listener
	addr  string
	reply func(cmd []string) (resp string, stream []byte, n int64)

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// startFakeRedis listens on addr ("127.0.0.1:0" for any port).
func startFakeRedis(t *testing.T, addr string, reply func([]string) (string, []byte, int64)) *fakeRedis {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRedis{t: t, ln: ln, addr: ln.Addr().String(), reply: reply, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(f.stop)
	return f
}

func (f *fakeRedis) url() string { return "redis://" + f.addr }

func (f *fakeRedis) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns[c] = true
		f.mu.Unlock()
		f.wg.Add(1)
		go f.handle(c)
	}
}

func (f *fakeRedis) handle(c net.Conn) {
	defer f.wg.Done()
	defer c.Close()
	rd := bufio.NewReader(c)
	for {
		cmd, err := readCommand(rd)
		if err != nil {
			return
		}
		resp, stream, n := f.reply(cmd)
		if _, err := io.WriteString(c, resp); err != nil {
			return
		}
		for sent := int64(0); sent < n; {
			chunk := stream[:min(int64(len(stream)), n-sent)]
			k, err := c.Write(chunk)
			if err != nil {
				return
			}
			sent += int64(k)
		}
	}
}

// stop closes the listener and every connection: the server is gone.
func (f *fakeRedis) stop() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// readCommand reads one command, an array of bulk strings.
func readCommand(rd *bufio.Reader) ([]string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil {
		return nil, err
	}
	cmd := make([]string, 0, n)
	for range n {
		line, err := rd.ReadString('\n')
		if err != nil {
			return nil, err
		}
		l, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil {
			return nil, err
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(rd, b); err != nil {
			return nil, err
		}
		cmd = append(cmd, string(b[:l]))
	}
	return cmd, nil
}
