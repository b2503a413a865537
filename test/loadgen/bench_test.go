package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRun200rps runs the generator at 200 req/s for 1 s per iteration
// against an in-process server and reports the process's CPU per second of
// load (cpu-ms/s). The server's CPU is included, so it is an upper bound on
// the generator's own; `go test -bench Run200 -benchtime 3x ./test/loadgen`.
func BenchmarkRun200rps(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	c := Config{URL: srv.URL, Rate: 200, Duration: time.Second}
	cpu0 := cpuTime(b)
	for b.Loop() {
		r, err := Run(context.Background(), c)
		if err != nil || r.Failed() != 0 {
			b.Fatalf("%v %v", r, err)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Milliseconds())/float64(b.N), "cpu-ms/s")
}

// cpuTime is the process's user plus system CPU so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
