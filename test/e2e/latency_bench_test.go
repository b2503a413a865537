package e2e

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
	"github.com/flexiq/flexiq-scaled/test/servers"
)

// BenchmarkBurstToFirstWorker measures, with the default 5 s poll, the time
// from a burst of 20 jobs being enqueued to the first new worker being
// active (its unit's ActiveEnterTimestampMonotonic; the sandbox shares the
// host's monotonic clock), per source: with event-driven wake-up (inotify
// for flexiq-sqlite, keyspace notifications for flexiq-redis and bullmq,
// LISTEN for River and graphile-worker) and, for flexiq-sqlite and
// flexiq-redis, with polling alone (wake-up turned off with
// FLEXIQ_SCALED_NO_WAKE in a drop-in). The sub-benchmarks are named
// SOURCE/MODE. Each burst lands at a random phase of the tick, so the
// polling figure includes the wait for the next tick, as a real burst's
// would.
//
// The clock starts just before the client enqueues: for the node clients
// (bullmq, graphile-worker) and River's, once connected, from the mark the
// client prints (FLEXIQ_MARK), so that node's start is not counted; for
// flexiq-redis, before redis-cli runs; for flexiq-sqlite, before the test's
// own insert.
//
//	go test -run '^$' -bench 'BurstToFirstWorker/flexiq-redis/' -benchtime 20x ./test/e2e/
func BenchmarkBurstToFirstWorker(b *testing.B) {
	for _, s := range burstSources() {
		for _, mode := range []string{"wake", "poll"} {
			if mode == "poll" && !s.poll {
				continue
			}
			b.Run(s.name+"/"+mode, func(b *testing.B) { benchBurst(b, s, mode == "wake") })
		}
	}
}

// A burstSource is one source type the benchmark bursts into.
type burstSource struct {
	name string
	poll bool // measure with polling alone too
	// setup readies the server and returns the pool's exec and source
	// lines.
	setup func(e *env) string
	// burst enqueues 20 jobs and returns CLOCK_MONOTONIC in µs just
	// before the client enqueued, and, when the client says, once it had
	// enqueued them all (else 0).
	burst func(e *env) (int64, int64)
	// clear removes what is left, so that the pool falls back to one
	// worker.
	clear func(e *env)
}

const benchPool = "burst"

var markRe = regexp.MustCompile(`flexiq-(mark|done)-usec=(\d+)`)

// marked runs a client with FLEXIQ_MARK set inside the sandbox and returns
// the marks it printed: just before it enqueued, and once it had.
func (e *env) marked(argv ...string) (int64, int64) {
	e.T.Helper()
	out, err := e.SB.Exec(e.Ctx(), append([]string{"env", "FLEXIQ_MARK=1"}, argv...)...)
	if err != nil {
		e.Fatalf("%v: %v\n%s", argv, err, out)
	}
	marks := map[string]int64{}
	for _, m := range markRe.FindAllStringSubmatch(out, -1) {
		marks[m[1]], _ = strconv.ParseInt(m[2], 10, 64)
	}
	if marks["mark"] == 0 || marks["done"] == 0 {
		e.Fatalf("%v printed no flexiq-mark-usec and flexiq-done-usec: %s", argv, out)
	}
	return marks["mark"], marks["done"]
}

func sleepPool(src string) string {
	return "exec = [\"/bin/sleep\", \"infinity\"]\nthreads_per_worker = 1\n[pools." + benchPool + ".source]\n" + src
}

func burstSources() []burstSource {
	root, _ := sandbox.ModuleRoot()
	pgURL := func(e *env) string { return servers.Postgres(e.T, e.SB, pgDB, pgPassword) }
	pgFull := func(url string) string { return strings.Replace(url, pgDB+"@", pgDB+":"+pgPassword+"@", 1) }
	pgSetup := func(e *env, typ, schema string) string {
		url := pgURL(e)
		e.Sh(fmt.Sprintf("umask 077; printf '%%s\\n' %q > /etc/flexiq-scaled/pg.password", pgPassword))
		return sleepPool(fmt.Sprintf("type = %q\nurl = %q\npassword_file = \"/etc/flexiq-scaled/pg.password\"\nschema = %q\n", typ, url, schema))
	}
	var riverURL, gwURL string
	return []burstSource{
		{name: "flexiq-sqlite", poll: true,
			setup: func(e *env) string {
				return fmt.Sprintf("exec = [\"/usr/local/bin/flexiq-testworker\", \"--poll\", \"50ms\"]\nenvironment = { FLEXIQ_DB_PATH = %q }\n[pools.%s.source]\ntype = \"flexiq-sqlite\"\npath = %q\n", e.DBPath, benchPool, e.DBPath)
			},
			burst: func(e *env) (int64, int64) {
				at := monotonicUsec()
				e.Enqueue(20, 2*time.Second)
				return at, monotonicUsec()
			},
			clear: func(e *env) {
				if _, err := e.DB.Exec("UPDATE jobs SET status = 5 WHERE status = 0"); err != nil {
					e.T.Fatal(err)
				}
			}},
		{name: "flexiq-redis", poll: true,
			setup: func(e *env) string {
				servers.Redis(e.T, e.SB)
				e.redis("FLUSHALL")
				e.redisNotify("Klzs")
				return sleepPool(fmt.Sprintf("type = \"flexiq-redis\"\nurl = %q\nqueues = [\"default\"]\n", redisURL))
			},
			burst: func(e *env) (int64, int64) {
				at := monotonicUsec()
				e.redisJobs(20, "default", 0, 0, time.Now().UnixMilli(), "")
				return at, monotonicUsec()
			},
			clear: func(e *env) { e.redis("DEL", "flexiq:queue:default:pending") }},
		{name: "bullmq",
			setup: func(e *env) string {
				npmCI(e.T, "bullmq")
				servers.Redis(e.T, e.SB)
				e.redis("FLUSHALL")
				e.redisNotify("Klzs")
				return sleepPool(fmt.Sprintf("type = \"bullmq\"\nurl = %q\nqueues = [\"burst\"]\n", redisURL))
			},
			burst: func(e *env) (int64, int64) {
				return e.marked("node", filepath.Join(root, "test/clients/bullmq/enqueue.js"), redisURL, "burst", "add", "20")
			},
			clear: func(e *env) { e.bullmq("burst", "obliterate") }},
		{name: "river",
			setup: func(e *env) string {
				need(e.T, "flexiq-river-client")
				toml := pgSetup(e, "river", "river")
				riverURL = pgFull(pgURL(e))
				e.SB.Exec(e.Ctx(), filepath.Join(binDir, "flexiq-river-client"), riverURL, "river")
				servers.PSQL(e.T, e.SB, pgDB, "DELETE FROM river.river_job")
				return toml
			},
			burst: func(e *env) (int64, int64) {
				return e.marked(filepath.Join(binDir, "flexiq-river-client"), riverURL, "river", "insert,burst,20")
			},
			clear: func(e *env) { servers.PSQL(e.T, e.SB, pgDB, "DELETE FROM river.river_job") }},
		{name: "graphile-worker",
			setup: func(e *env) string {
				npmCI(e.T, "graphile-worker")
				toml := pgSetup(e, "graphile-worker", "graphile_worker")
				gwURL = pgFull(pgURL(e))
				e.SB.Exec(e.Ctx(), "node", filepath.Join(root, "test/clients/graphile-worker/enqueue.js"), gwURL, "graphile_worker")
				servers.PSQL(e.T, e.SB, pgDB, "DELETE FROM graphile_worker._private_jobs")
				return toml
			},
			burst: func(e *env) (int64, int64) {
				return e.marked("node", filepath.Join(root, "test/clients/graphile-worker/enqueue.js"), gwURL, "graphile_worker", "add,-,20")
			},
			clear: func(e *env) { servers.PSQL(e.T, e.SB, pgDB, "DELETE FROM graphile_worker._private_jobs") }},
	}
}

func benchBurst(b *testing.B, s burstSource, wake bool) {
	e := setup(b)
	if !wake {
		// setup's cleanup removes the 90-* drop-ins.
		e.Write("/etc/systemd/system/flexiq-scaled.service.d/90-nowake.conf", "[Service]\nEnvironment=FLEXIQ_SCALED_NO_WAKE=1\n")
		e.Sh("systemctl daemon-reload")
	}
	pool := s.setup(e)
	e.Configure(fmt.Sprintf(`
[pools.%s]
poll_interval_sec = 5
min_workers = 1
max_workers = 4
target_queue_depth_per_worker = 5
scale_down_window_sec = 0
drain_timeout_sec = 2
%s`, benchPool, pool))
	e.StartDaemon()
	e.waitWorkers(benchPool, 1, 15*time.Second)
	if line := e.wakeUpLine(benchPool); strings.Contains(line, "wake-up is active") != wake {
		b.Fatalf("wake-up should be %v, the journal says %q", wake, line)
	}
	var samples, enqueued []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		time.Sleep(time.Duration(rand.Float64() * float64(5*time.Second)))
		b.StartTimer()
		landed, done := s.burst(e)
		var first int64
		e.Eventually(30*time.Second, "a second worker", func() (bool, string) {
			for _, u := range e.Workers(benchPool, "active") {
				if u == "flexiq-"+benchPool+"@1.service" {
					continue
				}
				at, _ := strconv.ParseInt(e.UnitProp(u, "ActiveEnterTimestampMonotonic"), 10, 64)
				if at > landed && (first == 0 || at < first) {
					first = at
				}
			}
			return first != 0, ""
		})
		samples = append(samples, float64(first-landed)/1e6)
		enqueued = append(enqueued, float64(done-landed)/1e6)
		if i == 0 {
			// The ticks of the first burst: what each saw, for reading
			// the figure.
			var ticks []string
			for _, l := range strings.Split(e.JournalText("FLEXIQ_POOL="+benchPool), "\n") {
				if strings.Contains(l, "pending=") {
					ticks = append(ticks, l)
				}
			}
			b.Logf("the first burst's last ticks:\n%s", strings.Join(ticks[max(len(ticks)-3, 0):], "\n"))
		}
		b.StopTimer()
		// Remove what is left and let the pool fall back to one worker.
		s.clear(e)
		e.waitWorkers(benchPool, 1, 60*time.Second)
		b.StartTimer()
	}
	slices.Sort(samples)
	slices.Sort(enqueued)
	b.ReportMetric(samples[len(samples)/2], "s-median")
	b.ReportMetric(samples[0], "s-min")
	b.ReportMetric(samples[len(samples)-1], "s-max")
	// How long the client took to enqueue the 20: a client that commits
	// one job at a time (graphile-worker's addJob) has only a few in by
	// the first wake-up's tick, too few for a second worker.
	b.ReportMetric(enqueued[len(enqueued)/2], "s-enqueue-median")
	b.Logf("burst → first new worker active, %d samples (s): %v", len(samples), samples)
	b.Logf("enqueueing the 20 jobs took (s): %v", enqueued)
}

func monotonicUsec() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano() / 1000
}
