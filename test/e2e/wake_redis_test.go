package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/servers"
)

// redisNotify sets the server's notify-keyspace-events, as its operator
// would (the daemon never does), and puts Debian's default ("") back after
// the test.
func (e *env) redisNotify(flags string) {
	e.T.Helper()
	e.redis("CONFIG", "SET", "notify-keyspace-events", flags)
	e.T.Cleanup(func() { servers.RedisCLI(e.T, e.SB, "CONFIG", "SET", "notify-keyspace-events", "") })
}

// wakePools are a flexiq-redis pool and a bullmq pool, each at one worker,
// polling every poll seconds.
func wakePools(poll int) string {
	pool := func(name, src string) string {
		return fmt.Sprintf(`
[pools.%[1]s]
exec = ["/bin/sleep", "infinity"]
min_workers = 1
max_workers = 3
target_queue_depth_per_worker = 5
threads_per_worker = 1
poll_interval_sec = %[2]d
drain_timeout_sec = 2
[pools.%[1]s.source]
url = %[3]q
%[4]s
`, name, poll, redisURL, src)
	}
	return pool("fq", `type = "flexiq-redis"
queues = ["default"]`) + pool("bq", `type = "bullmq"
queues = ["wake"]`)
}

// With notify-keyspace-events covering their keys (set by the test, as an
// operator would), a flexiq-redis pool and a bullmq pool polling every 30 s
// get their first new worker within seconds of a burst: the keyspace
// notifications wake them. Every Redis source's watcher is also run alone
// against the server (internal/source's TestRedisWatch): it wakes on its
// system's writes, resubscribes after its connection is killed, and
// unsubscribes as soon as its context ends. The daemon stops promptly with
// its subscriptions open.
func TestRedisWakeUp(t *testing.T) {
	parallel(t)
	e := setup(t)
	servers.Redis(t, e.SB)
	e.redis("FLUSHALL")
	e.redisNotify("Klzs")
	npmCI(t, "bullmq")

	e.sourceTest("TestRedisWatch|TestRedisWatchConfigRefused", "FLEXIQ_TEST_REDIS_URL="+redisURL)
	if t.Failed() {
		return
	}
	e.redis("FLUSHALL")

	e.Configure(wakePools(30))
	e.StartDaemon()
	for pool, want := range map[string]string{
		"fq": `wake-up is active: keyspace notifications on redis://127.0.0.1:6379 db 0 (2 keys; notify-keyspace-events is "`,
		"bq": `wake-up is active: keyspace notifications on redis://127.0.0.1:6379 db 0 (5 keys; notify-keyspace-events is "`,
	} {
		e.waitWorkers(pool, 1, 15*time.Second)
		if line := e.wakeUpLine(pool); !strings.Contains(line, want) {
			e.Fatalf("pool %s: journal says %q, want it to contain %q", pool, line, want)
		}
	}
	// The pools' first ticks were at their start; their next polls are
	// about 30 s away, so a second worker within 10 s can only come from a
	// wake-up.
	second := func(pool string, landed time.Time) {
		e.Eventually(10*time.Second, "a second worker in pool "+pool+" (the poll alone would take up to 30 s)", func() (bool, string) {
			ws := e.Workers(pool, "active")
			return len(ws) >= 2, fmt.Sprintf("active: %v", ws)
		})
		t.Logf("pool %s: burst → second worker active in %s (poll_interval_sec = 30)", pool, time.Since(landed).Round(10*time.Millisecond))
	}
	landed := time.Now()
	e.redisJobs(20, "default", 0, 0, landed.UnixMilli(), "")
	second("fq", landed)
	landed = time.Now() // includes node's start, about a second
	e.bullmq("wake", "add", "20")
	second("bq", landed)

	// The daemon stops promptly with its subscriptions open.
	began := time.Now()
	e.Sh("systemctl stop " + daemonUnit)
	if took := time.Since(began); took > 10*time.Second {
		e.Errorf("systemctl stop took %s with the pools' subscriptions open", took)
	} else {
		t.Logf("systemctl stop took %s (drain_timeout_sec = 2)", took.Round(10*time.Millisecond))
	}
	e.bullmq("wake", "obliterate")
}

// On Debian's default server (notify-keyspace-events ""), the journal says
// that a Redis pool polls only, and what the server would need; the pool
// still scales, at its poll.
func TestRedisWakeUpOff(t *testing.T) {
	parallel(t)
	e := setup(t)
	servers.Redis(t, e.SB)
	e.redis("FLUSHALL")
	e.redisNotify("")
	e.Configure(wakePools(3))
	e.StartDaemon()
	for pool, want := range map[string]string{
		"fq": `pool=fq wake-up is off, polling every 3s: flexiq-redis source redis://127.0.0.1:6379: notify-keyspace-events is ""; wake-up needs at least "Kzs"`,
		"bq": `pool=bq wake-up is off, polling every 3s: bullmq source redis://127.0.0.1:6379: notify-keyspace-events is ""; wake-up needs at least "Klz"`,
	} {
		e.waitWorkers(pool, 1, 15*time.Second)
		line := e.wakeUpLine(pool)
		if !strings.Contains(sortFlags(line), sortFlags(want)) || !strings.Contains(line, "polling only") {
			e.Fatalf("pool %s: journal says %q, want it to contain %q and end with polling only", pool, line, want)
		}
	}
	landed := time.Now()
	e.redisJobs(20, "default", 0, 0, landed.UnixMilli(), "")
	e.Eventually(10*time.Second, "a second worker at the next poll", func() (bool, string) {
		ws := e.Workers("fq", "active")
		return len(ws) >= 2, fmt.Sprintf("active: %v", ws)
	})
	t.Logf("burst → second worker active in %s (poll_interval_sec = 3, no wake-up)", time.Since(landed).Round(10*time.Millisecond))
}

// sortFlags makes the quoted "needs at least" setting comparable whatever
// the order of its flags.
func sortFlags(s string) string {
	const mark = `needs at least "`
	i := strings.Index(s, mark)
	if i < 0 {
		return s
	}
	rest := s[i+len(mark):]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return s
	}
	flags := []byte(rest[:j])
	for a := range flags {
		for b := a + 1; b < len(flags); b++ {
			if flags[b] < flags[a] {
				flags[a], flags[b] = flags[b], flags[a]
			}
		}
	}
	return s[:i+len(mark)] + string(flags) + rest[j:]
}

// Issue 17, item 16: after its server's outage, a pool's wake-up is active
// again at the pool's first good read once the server is back, not when the
// subscription's doubling backoff runs out (after a 16 s outage, its next
// retry was up to 16 s away), and the journal says when it was lost and
// when it is active again.
func TestRedisWakeUpAfterOutage(t *testing.T) {
	parallel(t)
	e := setup(t)
	servers.Redis(t, e.SB)
	e.redis("FLUSHALL")
	e.redisNotify("Klzs")
	e.Configure(wakePools(2))
	e.StartDaemon()
	e.waitWorkers("fq", 1, 15*time.Second)
	line := func(sub string) func() (bool, string) {
		return func() (bool, string) {
			for _, en := range e.Entries("FLEXIQ_POOL=fq", lifecycleID, fmt.Sprintf("_PID=%d", e.DaemonPID())) {
				if strings.Contains(en.Field("MESSAGE"), sub) {
					return true, ""
				}
			}
			return false, ""
		}
	}
	e.Eventually(15*time.Second, "wake-up active", line("pool=fq wake-up is active: keyspace notifications"))

	e.Sh("systemctl stop redis-server.service")
	e.Eventually(15*time.Second, "a journal line saying wake-up is lost", line("pool=fq wake-up is lost, polling every 2s until it is back: flexiq-redis source redis://127.0.0.1:6379"))
	time.Sleep(16 * time.Second) // the retries back off: 1, 2, 4, 8, then 16 s
	servers.Redis(t, e.SB)
	back := time.Now()
	// A restart forgets CONFIG SET: the operator sets it again at once.
	e.redis("CONFIG", "SET", "notify-keyspace-events", "Klzs")
	e.Eventually(30*time.Second, "a journal line saying wake-up is active again", line("pool=fq wake-up is active again: keyspace notifications on redis://127.0.0.1:6379"))
	took := time.Since(back)
	if took > 8*time.Second {
		e.Errorf("wake-up active again %s after the server came back; want it at the pool's first good read (poll_interval_sec = 2), not at the backoff's next retry", took)
	}
	t.Logf("server back → wake-up active again in %s (poll_interval_sec = 2; the backoff alone was up to 16 s)", took.Round(10*time.Millisecond))
	// The pool reads the server again.
	e.redisJobs(20, "default", 0, 0, time.Now().UnixMilli(), "")
	e.Eventually(10*time.Second, "a second worker after the outage", func() (bool, string) {
		ws := e.Workers("fq", "active")
		return len(ws) >= 2, fmt.Sprintf("active: %v", ws)
	})
}
