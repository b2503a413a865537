package probe

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/portowner"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// The replicas run in a child process (this test binary again), so that
// getrusage of the benchmark's own process counts the prober's CPU and
// not the 200 servers'.
const benchServerEnv = "FLEXIQ_PROBE_BENCH_SERVER"

// TestBenchServerProcess is the child: it serves /health on n loopback
// ports, prints them, and exits when its stdin closes. Skipped otherwise.
func TestBenchServerProcess(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(benchServerEnv))
	if err != nil {
		t.Skip("the benchmark's replica process only")
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go http.Serve(l, h)
		fmt.Printf("PORT %d\n", l.Addr().(*net.TCPAddr).Port)
	}
	fmt.Println("READY")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func startReplicas(b *testing.B, n int) []int {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchServerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), benchServerEnv+"="+strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	var ports []int
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "READY" {
		if p, ok := strings.CutPrefix(sc.Text(), "PORT "); ok {
			port, _ := strconv.Atoi(p)
			ports = append(ports, port)
		}
	}
	go io.Copy(io.Discard, out)
	if len(ports) != n {
		b.Fatalf("replica process gave %d ports, want %d", len(ports), n)
	}
	return ports
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkProbe200 is issue 19's target: 200 replicas probed by HTTP
// every second must cost the daemon under 5% of one core. It runs in real
// time (warm-up, then a measured window of FLEXIQ_PROBE_BENCH_SECONDS,
// default 3) and reports CPU seconds per wall second as core-fraction; run
// it with -benchtime=1x. "noop" probes with a check that does nothing:
// the scheduler's and the attempts' own share of the cost.
func BenchmarkProbe200(b *testing.B) {
	ports := startReplicas(b, 200)
	b.Run("http", func(b *testing.B) { benchProber(b, ports, true, false) })
	// With issue 27's listener check as the pool runs it: one sock_diag
	// dump per second and each replica's ports judged against its cgroup
	// (here the replica process's, the one cgroup it runs in).
	b.Run("http+owner", func(b *testing.B) { benchProber(b, ports, true, true) })
	b.Run("noop", func(b *testing.B) { benchProber(b, ports, false, false) })
}

// ownerRounds runs the pool's port check every period until stop: a dump,
// then every port judged against cgroup.
func ownerRounds(b *testing.B, ports []int, period time.Duration, stop <-chan struct{}) {
	root := units.Cgroup2Root()
	cg := ownCgroup()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		tbl, err := portowner.Dump(root)
		if err != nil {
			b.Error(err)
			return
		}
		for _, p := range ports {
			if foreign, err := tbl.Held(cg, []int{p}); err != nil || len(foreign) > 0 {
				b.Errorf("port %d: %v %v", p, foreign, err)
				return
			}
		}
	}
}

// ownCgroup is this process's cgroup2 path, which the replica process,
// its child, shares.
func ownCgroup() string {
	data, _ := os.ReadFile("/proc/self/cgroup")
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "0::"); ok {
			return rest
		}
	}
	return "/"
}

func benchProber(b *testing.B, ports []int, useHTTP, owner bool) {
	const period = time.Second
	window := 3 * time.Second
	if s := os.Getenv("FLEXIQ_PROBE_BENCH_SECONDS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			window = time.Duration(n) * time.Second
		}
	}
	for b.Loop() {
		var attempts, failures, dials atomic.Int64
		var lastErr atomic.Value
		p := New(SystemClock(nil), len(ports))
		p.afterAttempt = func(string) { attempts.Add(1) }
		client := NewHTTPClient()
		tr := client.Transport.(*http.Transport)
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, n, a string) (net.Conn, error) { dials.Add(1); return dial(ctx, n, a) }
		spec := Spec{Kind: KindHTTP, Path: "/health", Port: "http", Period: period, Timeout: period / 2}
		for i, port := range ports {
			check, err := spec.Check("127.0.0.1", map[string]int{"http": port}, client, nil)
			if err != nil {
				b.Fatal(err)
			}
			if !useHTTP {
				check = func(context.Context) error { return nil }
			}
			counted := func(ctx context.Context) error {
				err := check(ctx)
				if err != nil && ctx.Err() != context.Canceled { // Close cancels
					failures.Add(1)
					lastErr.Store(err.Error())
				}
				return err
			}
			if err := p.Add(Target{ID: fmt.Sprintf("bench@%d", i), Check: counted, Spec: spec}); err != nil {
				b.Fatal(err)
			}
		}
		go func() { // the pool's loop, reading transitions
			for range p.Transitions() {
			}
		}()
		stop := make(chan struct{})
		if owner {
			go ownerRounds(b, ports, period, stop)
		}
		time.Sleep(2 * period) // every target has fired and connected
		cpu0, wall0, n0 := cpuTime(), time.Now(), attempts.Load()
		time.Sleep(window)
		cpu, wall, n := cpuTime()-cpu0, time.Since(wall0), attempts.Load()-n0
		close(stop)
		p.Close()
		if failures.Load() > 0 {
			b.Fatalf("%d probes failed, the last: %v", failures.Load(), lastErr.Load())
		}
		b.ReportMetric(cpu.Seconds()/wall.Seconds(), "core-fraction")
		b.ReportMetric(float64(n)/wall.Seconds(), "probes/s")
		// One connection per replica, kept alive: more would mean a
		// handshake per attempt.
		b.ReportMetric(float64(dials.Load()), "dials")
	}
}
