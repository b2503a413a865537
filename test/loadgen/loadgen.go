// Package loadgen is a constant-rate (open-loop) HTTP load generator for
// issue 19's figure that matters: "at a steady 200 requests per second
// through nginx, a scale-up from 1 to 6 replicas and a scale-down back to 1
// lose zero requests (no 5xx, no connection error)", and its control run
// with the drain period at 0, which must show failures.
//
// Open loop: request i is sent at start + i/Rate whether or not earlier
// ones have answered, so a slow or vanishing replica shows up as failures
// and latency rather than as a lower send rate (a closed loop would wait
// and hide them). Every request ends in exactly one bucket of Result: a
// 2xx/3xx success, a status (4xx, 5xx, counted by code), a timeout, a
// connection error (refused, reset, closed early), or canceled (the
// caller's ctx ended first: the test's doing, not a loss).
//
// test/services runs it (as flexiq-loadgen) inside the sandbox, through
// nginx, while the daemon scales a pool of test/service replicas.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Config is one run. URL and Rate are required; the rest have defaults.
type Config struct {
	URL      string
	Rate     float64       // requests per second, > 0
	Duration time.Duration // how long to send; Rate×Duration requests in all
	Timeout  time.Duration // per request, headers and body (default 5 s)
	// Client sends the requests (default: keep-alive with enough idle
	// connections per host for the rate, as a proxy's clients have).
	Client *http.Client
	// MaxSamples bounds the error samples kept (default 5).
	MaxSamples int
}

// Run sends Rate×Duration GETs to URL at a steady rate and waits for every
// one to end (each is bounded by Timeout). It returns early, counting the
// requests cut short as Canceled and the ones not sent as not sent, when
// ctx ends. Only a bad Config is an error.
func Run(ctx context.Context, c Config) (Result, error) {
	if err := c.defaults(); err != nil {
		return Result{}, err
	}
	total := int(c.Rate*c.Duration.Seconds() + 0.5)
	interval := time.Duration(float64(time.Second) / c.Rate)
	rec := newRecorder(c.MaxSamples, total)
	var wg sync.WaitGroup
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := 0; i < total; i++ {
		// Scheduled from the start, not from the previous send, so a late
		// wake-up is caught up and the rate does not drift.
		timer.Reset(time.Until(start.Add(time.Duration(i) * interval)))
		select {
		case <-ctx.Done():
			i = total
			continue
		case <-timer.C:
		}
		wg.Add(1)
		go func(at time.Duration) {
			defer wg.Done()
			o := one(ctx, c)
			o.at = at
			rec.add(o)
		}(time.Since(start))
	}
	wg.Wait()
	r := rec.result()
	r.Elapsed = time.Since(start)
	return r, nil
}

// defaults checks c and fills in what is left out.
func (c *Config) defaults() error {
	switch {
	case c.URL == "":
		return errors.New("loadgen: no URL")
	case c.Rate <= 0:
		return fmt.Errorf("loadgen: rate %v: want > 0 requests per second", c.Rate)
	case c.Duration <= 0:
		return fmt.Errorf("loadgen: duration %v: want > 0", c.Duration)
	}
	if _, err := http.NewRequest(http.MethodGet, c.URL, nil); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.MaxSamples <= 0 {
		c.MaxSamples = 5
	}
	if c.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// Enough idle connections that a steady rate reuses them instead
		// of opening a connection per request (the default keeps 2).
		tr.MaxIdleConnsPerHost = max(16, int(c.Rate))
		c.Client = &http.Client{Transport: tr}
	}
	return nil
}

// outcome is how one request ended.
type outcome struct {
	kind    kind
	code    int
	at      time.Duration // when it was sent, from the start of the run
	latency time.Duration
	err     error
}

type kind int

const (
	kindOK kind = iota
	kindStatus
	kindTimeout
	kindConn
	kindCanceled
)

// one sends a request and reads its body to the end, so a response cut off
// mid-body counts as a connection error, not a success.
func one(ctx context.Context, c Config) outcome {
	rctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.URL, nil)
	if err != nil {
		return outcome{kind: kindConn, err: err}
	}
	t0 := time.Now()
	resp, err := c.Client.Do(req)
	if err == nil {
		if _, err = io.Copy(io.Discard, resp.Body); err != nil {
			err = fmt.Errorf("GET %s: reading the body: %w", c.URL, err)
		}
		resp.Body.Close()
	}
	lat := time.Since(t0)
	switch {
	case err != nil && ctx.Err() != nil:
		return outcome{kind: kindCanceled, latency: lat, err: err}
	case err != nil && isTimeout(err):
		return outcome{kind: kindTimeout, latency: lat, err: err}
	case err != nil:
		return outcome{kind: kindConn, latency: lat, err: err}
	case resp.StatusCode >= 200 && resp.StatusCode < 400:
		return outcome{kind: kindOK, code: resp.StatusCode, latency: lat}
	default:
		return outcome{kind: kindStatus, code: resp.StatusCode, latency: lat,
			err: fmt.Errorf("GET %s: status %s", c.URL, resp.Status)}
	}
}

// isTimeout tells a request that ran out of time from one that failed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
