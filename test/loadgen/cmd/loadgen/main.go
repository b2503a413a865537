// Command loadgen runs test/loadgen from a shell, for reproducing issue 19's
// zero-loss figure by hand (for example inside the sandbox, through nginx):
//
//	loadgen -url http://127.0.0.1:8080/ -rate 200 -duration 60s
//
// It prints the Result (as JSON with -json) and exits 1 if any request
// failed, 2 on a bad flag.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
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
	flag.Parse()

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
