package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
	"github.com/flexiq/flexiq-scaled/test/servers"
)

// The Redis family against Debian's redis-server in the sandbox: the
// generic redis type and the bullmq, celery, rq and sidekiq presets, all in
// one daemon. BullMQ's jobs are enqueued with BullMQ's own client
// (test/clients/bullmq, from npm). Celery and RQ are Python and Sidekiq is
// Ruby, whose clients these machines do not install: their key layouts are
// laid down as their own source writes them (kombu/transport/redis.py;
// rq/queue.py, rq/job.py and rq/registry.py; sidekiq/client.rb and
// sidekiq/launcher.rb), as the source files' comments describe.

const redisURL = "redis://127.0.0.1:6379"

// redisPools is one pool per type, with a do-nothing worker.
func redisPools() string {
	pool := func(name, source string) string {
		return fmt.Sprintf(`
[pools.%[1]s]
exec = ["/usr/bin/sleep", "infinity"]
min_workers = 0
max_workers = 3
target_queue_depth_per_worker = 1
poll_interval_sec = 0.5
scale_up_window_sec = 0
scale_down_window_sec = 1
drain_timeout_sec = 2
[pools.%[1]s.source]
url = %[2]q
%[3]s`, name, redisURL, source)
	}
	return pool("rg", `type = "redis"
[[pools.rg.source.keys]]
key = "rg:jobs"
[[pools.rg.source.keys]]
key = "rg:h"
[[pools.rg.source.keys]]
key = "rg:sched"
max = "now"
[[pools.rg.source.keys]]
key = "rg:busy"
role = "running"
`) + pool("bq", `type = "bullmq"
queues = ["mail", "sms"]
`) + pool("cq", `type = "celery"
queues = ["celery"]
key_prefix = "app:"
`) + pool("rq", `type = "rq"
queues = ["default"]
`) + pool("sk", `type = "sidekiq"
queues = ["default"]
`)
}

func (e *env) wantObserved(pool string, pending, running, paused int64, oldestMin, oldestMax float64) {
	e.T.Helper()
	o, out, err := e.observe(pool)
	if err != nil {
		e.Errorf("observe %s: %v: %s", pool, err, out)
		return
	}
	if o.Pending != pending || o.Running != running || o.Paused != paused {
		e.Errorf("pool %s: observed %s, want pending %d, running %d, paused %d", pool, strings.TrimSpace(out), pending, running, paused)
	}
	switch {
	case oldestMax == 0 && o.OldestAgeSec != nil:
		e.Errorf("pool %s: oldest_age_sec %v, want none", pool, *o.OldestAgeSec)
	case oldestMax > 0 && (o.OldestAgeSec == nil || *o.OldestAgeSec < oldestMin || *o.OldestAgeSec > oldestMax):
		e.Errorf("pool %s: observed %s, want oldest_age_sec in [%v, %v]", pool, strings.TrimSpace(out), oldestMin, oldestMax)
	}
}

// bullmq runs test/clients/bullmq/enqueue.js inside the sandbox.
func (e *env) bullmq(args ...string) {
	e.T.Helper()
	root, _ := sandbox.ModuleRoot()
	dir := filepath.Join(root, "test", "clients", "bullmq")
	npmCI(e.T, "bullmq")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := e.SB.Exec(ctx, append([]string{"node", filepath.Join(dir, "enqueue.js"), redisURL}, args...)...); err != nil {
		e.Fatalf("bullmq %v: %v\n%s", args, err, out)
	}
}

func (e *env) redis(args ...string) string {
	e.T.Helper()
	return servers.RedisCLI(e.T, e.SB, args...)
}

func TestRedisSources(t *testing.T) {
	parallel(t)
	e := setup(t)
	servers.Redis(t, e.SB)
	e.redis("FLUSHALL")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e.SB.Exec(ctx, "redis-cli", "-a", "s3cret", "--no-auth-warning", "CONFIG", "SET", "requirepass", "")
		e.SB.Exec(ctx, "redis-cli", "FLUSHALL")
	})
	e.Configure(redisPools())
	now := time.Now()
	sec := func(d time.Duration) string { return fmt.Sprint(now.Add(d).Unix()) }

	// Phase 1: what each source counts, future and paused work left out.
	t.Run("counts", func(t *testing.T) {
		// redis: a list, a hash, the due half of a sorted set, and a
		// running set.
		e.redis("RPUSH", "rg:jobs", "a", "b")
		e.redis("HSET", "rg:h", "x", "1")
		e.redis("ZADD", "rg:sched", sec(-10*time.Second), "due", sec(time.Hour), "future")
		e.redis("SADD", "rg:busy", "w1")
		e.wantObserved("rg", 4, 1, 0, 0, 0)

		// bullmq: mail has 2 waiting, 1 prioritized, 1 due delayed and 1
		// delayed an hour; sms is paused with 2 jobs.
		e.bullmq("mail", "add", "2")
		e.bullmq("mail", "prioritized", "1")
		e.bullmq("mail", "delayed", "1", "1")
		e.bullmq("mail", "delayed", "1", "3600000")
		e.bullmq("sms", "add", "2")
		e.bullmq("sms", "pause")
		time.Sleep(20 * time.Millisecond) // the 1 ms delay is due
		e.wantObserved("bq", 4, 0, 2, 0, 30)
		e.bullmq("sms", "resume")
		e.wantObserved("bq", 6, 0, 0, 0, 30)
		e.bullmq("sms", "obliterate")

		// celery: the four priority lists under global_keyprefix "app:",
		// and the unacked hash, one entry of another queue's.
		msg := func(q string) string {
			return fmt.Sprintf(`[{"body": "W10=", "content-encoding": "utf-8", "content-type": "application/json", "headers": {"task": "t", "id": "x"}, "properties": {"delivery_info": {"exchange": "", "routing_key": %q}, "priority": 0, "delivery_tag": "d"}}, "", %q]`, q, q)
		}
		e.redis("LPUSH", "app:celery", "m1", "m2")
		e.redis("LPUSH", "app:celery\x06\x163", "m3")
		e.redis("LPUSH", "app:celery\x06\x169", "m4")
		e.redis("LPUSH", "celery", "unprefixed") // not this pool's prefix
		e.redis("HSET", "app:unacked", "d1", msg("celery"), "d2", msg("celery"), "d3", msg("other"))
		e.wantObserved("cq", 4, 2, 0, 0, 0)

		// rq: two queued jobs enqueued a minute ago, one live and one
		// expired claim in the started registry, a scheduled job.
		enq := now.Add(-time.Minute).UTC().Format("2006-01-02T15:04:05.000000Z")
		e.redis("RPUSH", "rq:queue:default", "j1", "j2")
		e.redis("HSET", "rq:job:j1", "status", "queued", "enqueued_at", enq, "origin", "default")
		e.redis("HSET", "rq:job:j2", "status", "queued", "enqueued_at", now.UTC().Format("2006-01-02T15:04:05.000000Z"), "origin", "default")
		e.redis("ZADD", "rq:wip:default", sec(100*time.Second), "j3:e1", sec(-100*time.Second), "j4:e2")
		e.redis("ZADD", "rq:scheduled:default", sec(time.Hour), "j5")
		e.wantObserved("rq", 2, 1, 0, 55, 90)
		e.redis("SET", "rq:suspended", "1") // rq suspend
		e.wantObserved("rq", 0, 1, 2, 0, 0)
		e.redis("DEL", "rq:suspended")

		// sidekiq: two jobs (Sidekiq 8's enqueued_at in ms, 30 s ago), a
		// scheduled one, one live process with a job of this queue and
		// one of another, and a dead process's job.
		job := func(ms int64) string {
			return fmt.Sprintf(`{"retry":true,"queue":"default","class":"HardJob","args":[],"jid":"j%d","created_at":%d,"enqueued_at":%d}`, ms, ms, ms)
		}
		e.redis("LPUSH", "queue:default", job(now.Add(-30*time.Second).UnixMilli()), job(now.UnixMilli()))
		e.redis("ZADD", "schedule", sec(time.Hour), job(now.UnixMilli()+1))
		e.redis("SADD", "processes", "host:1:abc", "host:2:dead")
		e.redis("HSET", "host:1:abc", "info", `{"hostname":"host"}`, "busy", "2", "beat", sec(0))
		work := func(q string) string {
			return fmt.Sprintf(`{"queue":%q,"payload":"{}","run_at":%d}`, q, now.UnixMilli())
		}
		e.redis("HSET", "host:1:abc:work", "t1", work("default"), "t2", work("other"))
		e.redis("HSET", "host:2:dead:work", "t3", work("default"))
		e.wantObserved("sk", 2, 1, 0, 25, 60)
		// Sidekiq 7: enqueued_at in float seconds.
		e.redis("RPUSH", "queue:default", fmt.Sprintf(`{"queue":"default","class":"X","jid":"old","enqueued_at":%.3f}`, float64(now.Add(-45*time.Second).UnixMilli())/1000))
		e.wantObserved("sk", 3, 1, 0, 40, 75)
	})
	if t.Failed() {
		return
	}

	// Phase 2: every pool scales up on a burst and back down.
	e.redis("FLUSHALL")
	e.StartDaemon()
	for i := range 5 {
		e.redis("RPUSH", "rg:jobs", fmt.Sprint(i))
		e.redis("LPUSH", "app:celery", fmt.Sprint(i))
		e.redis("RPUSH", "rq:queue:default", fmt.Sprint(i))
		e.redis("LPUSH", "queue:default", `{"queue":"default","class":"X"}`)
	}
	e.bullmq("mail", "add", "5")
	for _, p := range []string{"rg", "bq", "cq", "rq", "sk"} {
		e.waitWorkers(p, 3, 30*time.Second)
	}
	e.redis("DEL", "rg:jobs", "app:celery", "rq:queue:default", "queue:default")
	e.bullmq("mail", "obliterate")
	for _, p := range []string{"rg", "bq", "cq", "rq", "sk"} {
		e.waitWorkers(p, 0, 30*time.Second)
	}

	// Phase 3: the server stopped mid-run: every pool holds, with an
	// error naming its type, the server and what failed; then recovers.
	e.redis("RPUSH", "rg:jobs", "1")
	e.waitWorkers("rg", 1, 20*time.Second)
	e.Sh("systemctl stop redis-server.service")
	for _, p := range []string{"rg", "bq", "cq", "rq", "sk"} {
		e.Eventually(20*time.Second, "a source error for pool "+p, func() (bool, string) {
			for _, en := range e.Entries("FLEXIQ_POOL="+p, "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b05") {
				msg := en.Field("FLEXIQ_ERROR")
				typ := map[string]string{"rg": "redis", "bq": "bullmq", "cq": "celery", "rq": "rq", "sk": "sidekiq"}[p]
				// Unreachable once it is down; timed out while it shuts down.
				if strings.Contains(msg, typ+" source "+redisURL+": unreachable") || strings.Contains(msg, typ+" source "+redisURL+": timed out") {
					return true, msg
				}
				return false, "error: " + msg
			}
			return false, "none yet"
		})
	}
	if _, out, err := e.observe("rg"); err == nil || !strings.Contains(out, "redis source "+redisURL+": unreachable: dial tcp 127.0.0.1:6379") {
		e.Errorf("observe rg with the server down: %v %q, want it unreachable", err, out)
	}
	time.Sleep(2 * time.Second) // a few ticks of the hold: past the scale-down window
	if ws := e.Workers("rg", "active"); len(ws) != 1 {
		e.Errorf("pool rg during the outage: %v, want its 1 worker held", ws)
	}
	servers.Redis(t, e.SB)
	// Every pool recovers (each after its own backoff), before the next
	// phase makes them fail again.
	for _, p := range []string{"rg", "bq", "cq", "rq", "sk"} {
		e.Eventually(30*time.Second, "source recovered for pool "+p, func() (bool, string) {
			n := len(e.Entries("FLEXIQ_POOL="+p, "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b08"))
			return n > 0, fmt.Sprint(n)
		})
	}

	// Phase 4: wrong credentials, and the wrong key type: errors that say so.
	e.redis("SET", "rg:str", "x")
	e.Write("/etc/flexiq-scaled/pw", "wrong\n")
	e.Sh("chmod 0600 /etc/flexiq-scaled/pw")
	e.Write("/etc/flexiq-scaled/bad.toml", fmt.Sprintf(`
[pools.wt]
exec = ["/usr/bin/sleep", "infinity"]
[pools.wt.source]
type = "redis"
url = %[1]q
keys = [{ key = "rg:jobs" }, { key = "rg:str" }]
[pools.pw]
exec = ["/usr/bin/sleep", "infinity"]
[pools.pw.source]
type = "rq"
url = %[1]q
password_file = "/etc/flexiq-scaled/pw"
queues = ["default"]
`, redisURL))
	for _, c := range []struct{ pool, want string }{
		{"wt", `redis source ` + redisURL + `: wrong key type: WRONGTYPE: key "rg:str" is a string`},
		{"pw", "rq source redis://:xxxxx@127.0.0.1:6379: authentication failed"}, // after requirepass, below
	} {
		pool, want := c.pool, c.want
		if pool == "pw" {
			e.redis("CONFIG", "SET", "requirepass", "s3cret")
		}
		_, out, err := e.observeConfig("/etc/flexiq-scaled/bad.toml", pool)
		if err == nil || !strings.Contains(out, want) {
			e.Errorf("observe %s: %v %q, want an error with %q", pool, err, out, want)
		}
	}
	// The daemon's pools, without a password, hold on the same error once
	// their connections (authenticated before requirepass) are gone.
	e.redis("-a", "s3cret", "--no-auth-warning", "CLIENT", "KILL", "TYPE", "normal")
	e.Eventually(20*time.Second, "an authentication error for pool sk", func() (bool, string) {
		for _, en := range e.Entries("FLEXIQ_POOL=sk", "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b05") {
			if msg := en.Field("FLEXIQ_ERROR"); strings.Contains(msg, "sidekiq source "+redisURL+": authentication failed") {
				return true, msg
			}
		}
		return false, ""
	})
	e.SB.Exec(context.Background(), "redis-cli", "-a", "s3cret", "--no-auth-warning", "CONFIG", "SET", "requirepass", "")
}
