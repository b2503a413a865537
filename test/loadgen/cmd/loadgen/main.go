// Command loadgen runs test/loadgen from a shell, for reproducing issue 19's
// zero-loss figure by hand (for example inside the sandbox, through nginx):
//
//	loadgen -url http://127.0.0.1:8080/ -rate 200 -duration 60s
//
// With -once it times a single request (issue 29's cold requests).
//
// It prints the Result (as JSON with -json) and exits 1 if any request
// failed, 2 on a bad flag.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flexiq/flexiq-scaled/test/loadgen"
)

func main() {
	var c loadgen.Config
	flag.StringVar(&c.URL, "url", "", "URL to GET")
	flag.Float64Var(&c.Rate, "rate", 200, "requests per second")
	flag.DurationVar(&c.Duration, "duration", 10*time.Second, "how long to send")
	flag.DurationVar(&c.Timeout, "timeout", 5*time.Second, "per-request timeout")
	asJSON := flag.Bool("json", false, "print the result as JSON")
	once := flag.Bool("once", false, "send one GET and print its status and its start and end (Unix ns): a latency without the client's own process start, which a curl run from a shell adds (some 25 ms here)")
	flag.Parse()
	if *once {
		os.Exit(getOnce(c.URL, c.Timeout))
	}

	// SIGINT or SIGTERM stops sending; what was in hand counts as canceled.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := loadgen.Run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *asJSON {
		out, _ := json.MarshalIndent(r, "", "  ")
		fmt.Println(string(out))
	} else {
		fmt.Println(r)
	}
	if r.Failed() > 0 {
		os.Exit(1)
	}
}

// getOnce sends one GET and prints "STATUS START_NS END_NS" (status 0: no
// answer), the times taken around the request alone; it exits 0 whenever
// it could print them.
func getOnce(url string, timeout time.Duration) int {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil}}
	start := time.Now()
	code := 0
	resp, err := client.Get(url)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		code = resp.StatusCode
	}
	end := time.Now()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	fmt.Println(code, start.UnixNano(), end.UnixNano())
	return 0
}
