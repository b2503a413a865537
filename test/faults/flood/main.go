// Command flexiq-flood is the fault suite's hostile local user: it floods a
// Unix socket with connections, or hands a connected socket to a child and
// exits. It prints what it saw as one JSON object.
//
//	flexiq-flood -socket PATH -n 1100 -mode reconnect -for 20s
//	flexiq-flood -socket PATH -n 400 -mode trickle -for 20s
//	flexiq-flood -socket PATH -mode handoff -request 'POST /v1/pools/p/pin' -body '{"workers":2}'
//
// reconnect: n connections, each sending a request, reading what comes back
// and connecting again at once when the server closes it; trickle: n
// connections sending a header one byte a second, each dialled again when
// the server closes it.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

type report struct {
	Dials      int            `json:"dials"`
	DialErrors map[string]int `json:"dial_errors"`
	Answers    map[int]int    `json:"answers"` // status code → count
	Closed     int            `json:"closed_by_server"`
	MaxOpen    int            `json:"max_open"`
}

type flood struct {
	mu   sync.Mutex
	r    report
	open int
}

func (f *flood) add(fn func(r *report)) {
	f.mu.Lock()
	fn(&f.r)
	f.mu.Unlock()
}

func (f *flood) opened(d int) {
	f.mu.Lock()
	f.open += d
	f.r.MaxOpen = max(f.r.MaxOpen, f.open)
	f.mu.Unlock()
}

func main() {
	socket := flag.String("socket", "", "the Unix socket")
	n := flag.Int("n", 100, "connections at once")
	mode := flag.String("mode", "reconnect", "reconnect, trickle or handoff")
	dur := flag.Duration("for", 20*time.Second, "how long to flood")
	request := flag.String("request", "GET /v1/status", "handoff: the request's method and path")
	body := flag.String("body", "", "handoff: the request's body")
	flag.Parse()

	if *mode == "handoff" {
		os.Exit(handoff(*socket, *request, *body))
	}
	f := &flood{r: report{DialErrors: map[string]int{}, Answers: map[int]int{}}}
	end := time.Now().Add(*dur)
	var wg sync.WaitGroup
	for range *n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				f.add(func(r *report) { r.Dials++ })
				c, err := net.Dial("unix", *socket)
				if err != nil {
					msg := err.Error()
					if i := strings.LastIndex(msg, ": "); i >= 0 {
						msg = msg[i+2:]
					}
					f.add(func(r *report) { r.DialErrors[msg]++ })
					time.Sleep(100 * time.Millisecond)
					continue
				}
				f.opened(1)
				if *mode == "trickle" {
					trickle(f, c, end)
				} else {
					ask(f, c, end)
				}
				f.opened(-1)
				c.Close()
			}
		}()
	}
	wg.Wait()
	json.NewEncoder(os.Stdout).Encode(f.r)
}

// ask sends a request, reads the answer, and goes on asking on the same
// connection every 20 s until the server closes it or the flood ends.
func ask(f *flood, c net.Conn, end time.Time) {
	br := bufio.NewReader(c)
	for {
		io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: flexiq-scaled\r\n\r\n")
		c.SetReadDeadline(end)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if time.Now().Before(end) {
				f.add(func(r *report) { r.Closed++ })
			}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		f.add(func(r *report) { r.Answers[resp.StatusCode]++ })
		if resp.Close {
			f.add(func(r *report) { r.Closed++ })
			return
		}
		time.Sleep(min(time.Until(end), 20*time.Second))
		if !time.Now().Before(end) {
			return
		}
	}
}

// trickle sends a header a byte a second until the server closes the
// connection (or answers) or the flood ends.
func trickle(f *flood, c net.Conn, end time.Time) {
	if _, err := io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: flexiq-scaled\r\nX-Slow: "); err != nil {
		f.add(func(r *report) { r.Closed++ })
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.SetReadDeadline(end)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			f.add(func(r *report) { r.Answers[resp.StatusCode]++ })
		}
	}()
	for {
		select {
		case <-done:
			if time.Now().Before(end) {
				f.add(func(r *report) { r.Closed++ })
			}
			return
		case <-time.After(time.Second):
			c.Write([]byte("a"))
		}
	}
}

// handoff connects, starts a child of its own that inherits the socket,
// and exits: the child, once this process is gone, sends the request and
// prints the answer's status and body. (The attack of issue 17's item 2: a
// daemon that judged the caller only at the request, and from NSS once the
// caller was gone.)
func handoff(socket, request, body string) int {
	if os.Getenv("FLOOD_CHILD") != "" {
		c, err := net.FileConn(os.NewFile(3, "socket"))
		if err != nil {
			fmt.Println("child:", err)
			return 1
		}
		time.Sleep(500 * time.Millisecond) // the parent is gone by now
		method, path, _ := strings.Cut(request, " ")
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: flexiq-scaled\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", method, path, len(body), body)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			fmt.Println("no answer:", err)
			return 1
		}
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %s\n", resp.StatusCode, strings.TrimSpace(string(b)))
		return 0
	}
	c, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	file, err := c.(*net.UnixConn).File()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), "FLOOD_CHILD=1")
	cmd.ExtraFiles = []*os.File{file}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}
