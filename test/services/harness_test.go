// Package services tests service pools (issue 19) against the real
// systemd, nginx and Prometheus of Debian, in a sandbox: replicas of
// test/service behind nginx, traffic from test/loadgen inside the
// sandbox, the daemon scaling them. Each test boots a sandbox of its own
// (with its own network namespace). The tests with figures or latencies
// (zero loss, squatters, socket activation, gang, the wake address's cold
// requests, burst and awake load) run one after the other, alone: they
// need a quiet machine. The others, which measure nothing and wait with
// generous deadlines (restart, Prometheus, the command probe's user, the
// wake address's reject mode, restart and HAProxy cycles), then run side
// by side (t.Parallel: Go runs them after the sequential ones, as many at
// once as -parallel, GOMAXPROCS by default), to keep CI short.
//
// The figures are on FIGURE lines:
//
//	go test -count=1 -v ./test/services/ 2>&1 | grep FIGURE
package services

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/harness"
	"github.com/flexiq/flexiq-scaled/test/loadgen"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// binDir holds the binaries built once per run, in the checkout, which every
// sandbox sees at the same path.
var binDir string

const daemonUnit = harness.DaemonUnit

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if why := sandbox.Unsupported(); why != "" {
		fmt.Fprintln(os.Stderr, "service pool tests skipped: "+why)
		return m.Run()
	}
	var err error
	if binDir, err = harness.Build("services",
		harness.Bin{Pkg: "./cmd/flexiq-scaled", Name: "flexiq-scaled"},
		harness.Bin{Pkg: "./test/service", Name: "flexiq-testservice"},
		harness.Bin{Pkg: "./test/loadgen/cmd/loadgen", Name: "flexiq-loadgen"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// env is one test's sandbox with the daemon, the test service and the load
// generator installed.
type env struct {
	*harness.Env
}

func boot(t *testing.T) *env {
	t.Helper()
	if why := sandbox.Unsupported(); why != "" {
		t.Skip("service pool tests skipped: " + why)
	}
	name := strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name()))
	name = strings.TrimPrefix(name, "test")
	if len(name) > 22 {
		name = name[:22]
	}
	sb := harness.Boot(t, 5*time.Minute, sandbox.Options{
		Name:        fmt.Sprintf("svc-%s-%d", strings.Trim(name, "-"), os.Getpid()%10000),
		StopTimeout: 5 * time.Second,
	})
	harness.JournalOnFailure(t, sb, "-n", "150", "-u", "flexiq-scaled", "-u", "flexiq-*", "-u", "nginx")
	harness.InstallDaemon(t, sb, harness.Daemon{
		BinDir: binDir,
		Tools: map[string]string{
			"flexiq-testservice": "/usr/local/bin/flexiq-testservice",
			"flexiq-loadgen":     "/usr/local/bin/flexiq-loadgen",
		},
		DropIn: "WatchdogSec=10s\nRestartSec=500ms\n",
	})
	return &env{&harness.Env{T: t, SB: sb}}
}

// figure logs a measurement in a greppable form.
func (e *env) figure(name string, kv ...any) {
	e.T.Helper()
	e.T.Log(harness.FigureLine("FIGURE service="+name, 3, kv...))
}

// configure writes config.toml and the files it names.
func (e *env) configure(toml string, files map[string]string) {
	e.T.Helper()
	for path, content := range files {
		e.Write(path, content)
	}
	e.Write("/etc/flexiq-scaled/config.toml", toml)
}

// replica is one entry of the discovery JSON file, as the tests read it.
type replica struct {
	Slot    int            `json:"slot"`
	Unit    string         `json:"unit"`
	Address string         `json:"address"`
	Ports   map[string]int `json:"ports"`
	Rank    int            `json:"rank"`
}

// discovered reads /run/flexiq-scaled/discovery/POOL.json; nil when it is
// not there yet.
func (e *env) discovered(pool string) ([]replica, error) {
	out, err := e.Try("cat", "/run/flexiq-scaled/discovery/"+pool+".json")
	if err != nil {
		return nil, nil
	}
	var f struct {
		Replicas []replica `json:"replicas"`
	}
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		return nil, fmt.Errorf("discovery file of %s: %v\n%s", pool, err, out)
	}
	return f.Replicas, nil
}

// waitDiscovered waits until the pool's discovery file lists n replicas.
func (e *env) waitDiscovered(pool string, n int, within time.Duration) []replica {
	e.T.Helper()
	var got []replica
	e.Eventually(within, fmt.Sprintf("%d replicas of %s in discovery", n, pool), func() (bool, string) {
		r, err := e.discovered(pool)
		if err != nil {
			e.T.Fatal(err)
		}
		got = r
		return len(r) == n, fmt.Sprintf("%d listed: %+v", len(r), r)
	})
	return got
}

// startNginx starts Debian's nginx with one site of its own in place of
// Debian's default site.
func (e *env) startNginx(site string) {
	e.T.Helper()
	e.Sh("rm -f /etc/nginx/sites-enabled/default")
	e.Write("/etc/nginx/sites-enabled/flexiq-test", site)
	e.Sh("systemctl start nginx.service")
}

// loadgen runs the load generator inside the sandbox (whose loopback
// nginx listens on) and returns its result.
func (e *env) loadgen(ctx context.Context, url string, rate float64, d time.Duration) (loadgen.Result, error) {
	cmd := e.SB.Command(ctx, "/usr/local/bin/flexiq-loadgen", "-url", url,
		"-rate", fmt.Sprint(rate), "-duration", d.String(), "-timeout", "5s", "-json")
	out, err := cmd.Output()
	var r loadgen.Result
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		return r, fmt.Errorf("loadgen: %v (%v): %s", jerr, err, out)
	}
	return r, nil
}
