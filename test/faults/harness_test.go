// Package faults is the fault-injection suite: each test runs the real
// flexiq-scaled binary as a Type=notify service under the distro's real
// systemd (a sandbox of its own, so that the tests run side by side),
// injects one fault, and checks the promise the daemon makes about it.
//
// Every test reports what it measured on lines of the form
//
//	FIGURE fault=<name> <key>=<value> ...
//
// which docs/reliability.md's table is filled from:
//
//	make faults 2>&1 | grep FIGURE
package faults

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/flexiq/flexiq-scaled/test/harness"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// Binaries built once per run, into the checkout, which every sandbox sees
// at the same path.
var binDir string

// The queue databases live in a host directory that every sandbox sees as
// dbInside: under /var/lib, as on a real host, since the daemon's unit hides
// /tmp and /home from it.
var dbHost string

const (
	dbInside   = "/var/lib/flexiq-faults"
	daemonUnit = "flexiq-scaled.service"
	// The test drop-in's values: short, so that restarts are quick. Tests
	// that judge the watchdog rely on them.
	watchdogSec = 4
	restartSec  = 0.5
)

// Most tests spend their time waiting for systemd and the daemon, not on the
// CPU: run more of them at once than the default (GOMAXPROCS), unless the
// command line says otherwise.
const defaultParallel = 8

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", strconv.Itoa(defaultParallel))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if why := sandbox.Unsupported(); why != "" {
		fmt.Fprintln(os.Stderr, "fault-injection tests skipped: "+why)
		return m.Run()
	}
	var err error
	if binDir, err = harness.Build("faults",
		harness.Bin{Pkg: "./cmd/flexiq-scaled", Name: "flexiq-scaled"},
		harness.Bin{Pkg: "./test/worker", Name: "flexiq-testworker"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if dbHost, err = os.MkdirTemp("", "flexiq-faults-db-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dbHost)
	// The workers run as flexiq and open the databases read-write.
	if err := os.Chmod(dbHost, 0o777); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

var sandboxSeq atomic.Int32

// env is one test's sandbox, with the daemon installed and a queue database.
type env struct {
	*harness.Env
	name string // the fault's name in FIGURE lines

	busMu sync.Mutex
	bus   *sddbus.Conn
}

// setup boots a sandbox of the test's own (the tests run in parallel, and
// each needs a daemon and a config of its own), installs the daemon, its
// unit with short watchdog and restart delays, and the test worker, and
// creates the test's database: flexiq's schema plus a one-row demand table
// that a sqlite-query source can read, so that a test sets the demand
// exactly.
func setup(t *testing.T, fault string) *env {
	t.Helper()
	if why := sandbox.Unsupported(); why != "" {
		t.Skip("fault-injection tests skipped: " + why)
	}
	t.Parallel()
	return boot(t, fault)
}

// setupAlone is setup for a test that measures speed: it runs before the
// parallel tests start, alone on the machine, so that its figures are its
// own and not the noise of a dozen other sandboxes.
func setupAlone(t *testing.T, fault string) *env {
	t.Helper()
	if why := sandbox.Unsupported(); why != "" {
		t.Skip("fault-injection tests skipped: " + why)
	}
	return boot(t, fault)
}

func boot(t *testing.T, fault string) *env {
	t.Helper()
	root, _ := sandbox.ModuleRoot()
	sb := harness.Boot(t, 3*time.Minute, sandbox.Options{
		Name:  fmt.Sprintf("flt-%d-%d", os.Getpid(), sandboxSeq.Add(1)),
		Binds: []string{root, dbHost + ":" + dbInside},
		// Nothing of a sandbox outlives its test: no need for a clean
		// drain at poweroff, and stubborn workers would only slow it.
		StopTimeout: 5 * time.Second,
	})
	e := &env{Env: &harness.Env{T: t, SB: sb, JournalLines: 80, Poll: 100 * time.Millisecond}, name: fault}
	t.Cleanup(func() {
		e.busMu.Lock()
		defer e.busMu.Unlock()
		if e.bus != nil {
			e.bus.Close()
		}
	})
	harness.InstallDaemon(t, sb, harness.Daemon{
		BinDir: binDir,
		Tools:  map[string]string{"flexiq-testworker": "/usr/local/bin/flexiq-testworker"},
		DropIn: fmt.Sprintf("WatchdogSec=%ds\nRestartSec=%dms\n", watchdogSec, int(restartSec*1000)),
	})
	e.CreateQueue(dbHost, dbInside)
	if _, err := e.DB.Exec(`CREATE TABLE demand (pending, running); INSERT INTO demand VALUES (0, 0)`); err != nil {
		t.Fatal(err)
	}
	return e
}

// figure reports a measurement in the greppable form docs/reliability.md
// is filled from.
func (e *env) figure(kv ...any) {
	e.T.Helper()
	e.T.Log(harness.FigureLine("FIGURE fault="+e.name, 2, kv...))
}

// demandPool is a pool whose source is the test's demand table, so the
// pending count is whatever setDemand says, with workers that do nothing
// (the default is a sleep) or exec's. extra adds keys.
func (e *env) demandPool(pool, extra string) string {
	if !strings.Contains(extra, "exec =") {
		extra = `exec = ["/bin/sleep", "infinity"]` + "\n" + extra
	}
	if !strings.Contains(extra, "poll_interval_sec =") {
		extra += "poll_interval_sec = 1\n"
	}
	return fmt.Sprintf(`
[pools.%s]
environment = { FLEXIQ_DB_PATH = %q }
target_queue_depth_per_worker = 1
threads_per_worker = 1
target_utilisation = 1.0
%s
[pools.%s.source]
type = "sqlite-query"
path = %q
query = "SELECT pending, running FROM demand"
`, pool, e.DBPath, extra, pool, e.DBPath)
}

// jobPool is a pool of test workers on the test's flexiq queue.
func (e *env) jobPool(pool, extra string) string {
	if !strings.Contains(extra, "exec =") {
		extra = `exec = ["/usr/local/bin/flexiq-testworker", "--poll", "50ms"]` + "\n" + extra
	}
	if !strings.Contains(extra, "poll_interval_sec =") {
		extra += "poll_interval_sec = 1\n"
	}
	return fmt.Sprintf(`
[pools.%s]
environment = { FLEXIQ_DB_PATH = %q }
%s
[pools.%s.source]
type = "flexiq-sqlite"
path = %q
`, pool, e.DBPath, extra, pool, e.DBPath)
}

// setDemand sets what the demand pools' source reads: a pending count (depth
// 1 makes it the number of workers asked for) and a running count. Values
// are written as given, so a test can write garbage.
func (e *env) setDemand(pending, running any) {
	e.T.Helper()
	if _, err := e.DB.Exec(`UPDATE demand SET pending = ?, running = ?`, pending, running); err != nil {
		e.T.Fatal(err)
	}
}

// conn is the test's own connection to the sandbox's systemd, reopened
// after a restart of the bus.
func (e *env) conn() (*sddbus.Conn, error) {
	e.busMu.Lock()
	defer e.busMu.Unlock()
	if e.bus != nil && e.bus.Connected() {
		return e.bus, nil
	}
	if e.bus != nil {
		e.bus.Close()
		e.bus = nil
	}
	// Not a context with a deadline: the connection lives as long as it.
	c, err := e.SB.Bus(context.Background())
	if err != nil {
		return nil, err
	}
	e.bus = c
	return c, nil
}

// unit is one worker unit as systemd lists it.
type unit = harness.Unit

// units lists the pool's loaded worker units ("*" for every pool), over
// D-Bus: it is fast enough to poll every 100 ms. While the bus restarts it
// falls back to systemctl, which waits for it.
func (e *env) units(pool string) []unit {
	e.T.Helper()
	us, err := e.listUnits(pool)
	if err != nil {
		e.T.Fatal(err)
	}
	return us
}

// listUnits is units for a goroutine, which must not fail the test itself.
func (e *env) listUnits(pool string) ([]unit, error) {
	pattern := "flexiq-" + pool + "@*.service"
	for attempt := 0; attempt < 3; attempt++ {
		c, err := e.conn()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var st []sddbus.UnitStatus
			st, err = c.ListUnitsByPatternsContext(ctx, nil, []string{pattern})
			cancel()
			if err == nil {
				us := make([]unit, 0, len(st))
				for _, s := range st {
					if s.LoadState == "not-found" && s.ActiveState == "inactive" {
						continue
					}
					us = append(us, unit{Name: s.Name, Load: s.LoadState, Active: s.ActiveState, Sub: s.SubState})
				}
				sort.Slice(us, func(i, j int) bool { return us[i].Slot() < us[j].Slot() })
				return us, nil
			}
		}
		e.busMu.Lock()
		if e.bus != nil {
			e.bus.Close()
			e.bus = nil
		}
		e.busMu.Unlock()
		time.Sleep(200 * time.Millisecond)
	}
	return e.ListUnits(pattern)
}

// live are the units in the states that count as capacity: active or
// starting, not stopping.
func live(us []unit) []unit {
	var out []unit
	for _, u := range us {
		if u.Active == "active" || u.Active == "activating" || u.Active == "reloading" {
			out = append(out, u)
		}
	}
	return out
}

// running are the units with processes: anything but inactive or failed.
func running(us []unit) []unit {
	var out []unit
	for _, u := range us {
		if u.Active != "inactive" && u.Active != "failed" {
			out = append(out, u)
		}
	}
	return out
}

func names(us []unit) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.Name + "(" + u.Active + "/" + u.Sub + ")"
	}
	return out
}

// waitLive waits until the pool has exactly n live workers, and returns how
// long that took.
func (e *env) waitLive(pool string, n int, within time.Duration) time.Duration {
	e.T.Helper()
	t0 := time.Now()
	e.Eventually(within, fmt.Sprintf("%d live workers in pool %s", n, pool), func() (bool, string) {
		us := e.units(pool)
		return len(live(us)) == n, fmt.Sprint(names(us))
	})
	return time.Since(t0)
}

// at is when a journal entry was written.
func at(en sandbox.JournalEntry) time.Time {
	us, _ := strconv.ParseInt(en.Field("__REALTIME_TIMESTAMP"), 10, 64)
	return time.UnixMicro(us)
}

// identity is what tells one run of a worker from another.
type identity struct{ pid, invocation string }

// identities reads the identity of each live worker of the pool.
func (e *env) identities(pool string) map[string]identity {
	e.T.Helper()
	ids := map[string]identity{}
	for _, u := range live(e.units(pool)) {
		if id, ok := e.busIdentity(u.Name); ok {
			ids[u.Name] = id
			continue
		}
		out, _ := e.Try("systemctl", "show", "-P", "MainPID,InvocationID", u.Name)
		f := strings.Fields(out)
		if len(f) == 2 {
			ids[u.Name] = identity{f[0], f[1]}
		}
	}
	return ids
}

// busIdentity reads a unit's identity over D-Bus, quickly enough to take a
// snapshot of a pool between two of its ticks.
func (e *env) busIdentity(name string) (identity, bool) {
	c, err := e.conn()
	if err != nil {
		return identity{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	inv, err := c.GetUnitPropertyContext(ctx, name, "InvocationID")
	if err != nil {
		return identity{}, false
	}
	pid, err := c.GetServicePropertyContext(ctx, name, "MainPID")
	if err != nil {
		return identity{}, false
	}
	b, _ := inv.Value.Value().([]byte)
	return identity{fmt.Sprint(pid.Value.Value()), fmt.Sprintf("%x", b)}, true
}

// killMain sends sig to a unit's main process, through systemd, as an OOM
// killer or an operator would hit it.
func (e *env) killMain(unit string, sig syscall.Signal) {
	e.T.Helper()
	if _, err := e.Try("systemctl", "kill", "--kill-whom=main", "--signal="+strconv.Itoa(int(sig)), unit); err != nil {
		e.T.Fatal(err)
	}
}

// waitRestarted waits until systemd has restarted the daemon after oldPID
// died, and returns when it became active again.
func (e *env) waitRestarted(oldPID int, within time.Duration) time.Time {
	e.T.Helper()
	e.Eventually(within, "a restarted daemon", func() (bool, string) {
		out, _ := e.Try("systemctl", "show", "-P", "MainPID,ActiveState", daemonUnit)
		f := strings.Fields(out)
		return len(f) == 2 && f[0] != "0" && f[0] != strconv.Itoa(oldPID) && f[1] == "active", out
	})
	return time.Now()
}

// eventKind finds a journal event kind's MESSAGE_ID in internal/eventlog's
// source, so that a test asserts on a kind as soon as it exists there and
// says so when it does not yet.
func eventKind(name string) string {
	root, err := sandbox.ModuleRoot()
	if err != nil {
		return ""
	}
	files, _ := filepath.Glob(filepath.Join(root, "internal", "eventlog", "*.go"))
	re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + `\s+Kind\s*=\s*"([0-9a-f]{32})"`)
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if m := re.FindSubmatch(b); m != nil {
			return string(m[1])
		}
	}
	return ""
}

// The journal's MESSAGE_IDs of the daemon's events (internal/eventlog).
const (
	msgDecision        = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01"
	msgWorkerStarted   = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b02"
	msgWorkerStopped   = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b03"
	msgWorkerCrashed   = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b04"
	msgSourceError     = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b05"
	msgSourceRecovered = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b08"
)

// jitter is a random duration in [lo, hi).
func jitter(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// seeded returns a random source, logging its seed so that a failing run
// can be replayed with FAULTS_SEED.
func seeded(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FAULTS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("random seed %d (FAULTS_SEED=%d replays it)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// sample is one listing of a pool's units by a monitor.
type sample struct {
	at    time.Time
	units []unit
}

func (s sample) live() int { return len(live(s.units)) }

// monitor lists a pool's units every few milliseconds in the background, so
// that a test can check a promise at every moment, not just at the end.
type monitor struct {
	mu      sync.Mutex
	samples []sample
	errs    int
	stop    chan struct{}
	done    chan struct{}
}

func (e *env) watch(pool string, every time.Duration) *monitor {
	m := &monitor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			us, err := e.listUnits(pool)
			m.mu.Lock()
			if err != nil {
				m.errs++
			} else {
				m.samples = append(m.samples, sample{time.Now(), us})
			}
			m.mu.Unlock()
			select {
			case <-m.stop:
				return
			case <-time.After(every):
			}
		}
	}()
	e.T.Cleanup(m.Stop)
	return m
}

// Stop ends the monitor; it may be called more than once.
func (m *monitor) Stop() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
}

// between returns the samples taken in [from, to].
func (m *monitor) between(from, to time.Time) []sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []sample
	for _, s := range m.samples {
		if !s.at.Before(from) && !s.at.After(to) {
			out = append(out, s)
		}
	}
	return out
}

func (m *monitor) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.samples)
}

// waitStarted waits until n test workers of pool have said they started.
// The test worker ignores SIGTERM from its first lines of Go on, not from
// its exec, which is when systemd calls it active: with wake-up the daemon
// can drain a worker within milliseconds of a change of demand, and a test
// that means to drain a worker ignoring SIGTERM must not catch one still in
// its runtime's start.
func (e *env) waitStarted(pool string, n int) {
	e.T.Helper()
	e.Eventually(10*time.Second, fmt.Sprintf("%d workers of %s started", n, pool), func() (bool, string) {
		got := strings.Count(e.JournalText("FLEXIQ_POOL="+pool), "started id=")
		return got >= n, fmt.Sprintf("%d started", got)
	})
}
