package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/servers"
)

// The flexiq network sources against the real servers, inside the sandbox.
// flexiq's own worker is not installable here, and the test worker speaks
// SQLite only, so the jobs are laid down as flexiq's storage code writes
// them (crates/flexiq-core/src/storage/ in flexiq's repository; see each
// test), and the pool's workers are placeholders (sleep): the pool scales
// up on the pending jobs, and back down once the test deletes them.

// netPool is a pool of placeholder workers reading src (the lines of its
// [pools.NAME.source] table).
func netPool(pool, src string) string {
	return fmt.Sprintf(`
[pools.%[1]s]
exec = ["/bin/sleep", "infinity"]
min_workers = 0
max_workers = 4
target_queue_depth_per_worker = 5
threads_per_worker = 1
scale_down_window_sec = 2
drain_timeout_sec = 2
poll_interval_sec = 0.5
[pools.%[1]s.source]
%[2]s
`, pool, src)
}

func (e *env) mustObserve(pool string) observed {
	e.T.Helper()
	o, out, err := e.observe(pool)
	if err != nil {
		e.T.Fatalf("observe %s failed: %v: %s", pool, err, out)
	}
	return o
}

// threads runs test/clients/flexiqthreads inside the sandbox: the pool's
// threads_per_worker as "auto" reads it, and whether any live worker said.
func (e *env) threads(pool string) (int, bool) {
	e.T.Helper()
	out, err := e.SB.Exec(e.Ctx(), need(e.T, "flexiqthreads"), pool)
	if err != nil {
		e.T.Fatalf("flexiqthreads: %v", err)
	}
	var r struct {
		Threads int
		OK      bool
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.T.Fatalf("flexiqthreads printed %q: %v", out, err)
	}
	return r.Threads, r.OK
}

// holdAndRecover stops the server's unit mid-run and checks the daemon
// holds (a SourceError naming the source and server) and recovers
// (SourceRecovered) once it is back.
func (e *env) holdAndRecover(pool, unit, typ, server string, afterStart func()) {
	e.T.Helper()
	e.Sh("systemctl stop " + unit)
	e.Eventually(20*time.Second, "a SourceError", func() (bool, string) {
		for _, en := range e.Entries("-u", daemonUnit, sourceErrorID) {
			msg := en.Field("FLEXIQ_ERROR")
			if strings.Contains(msg, typ) && strings.Contains(msg, server) {
				return true, msg
			}
		}
		return false, "none yet"
	})
	if n := len(e.Workers(pool, "active")); n != 1 {
		e.Errorf("holding: %d workers, want the 1 it had", n)
	}
	e.Sh("systemctl start " + unit)
	if afterStart != nil {
		afterStart()
	}
	e.Eventually(30*time.Second, "a SourceRecovered", func() (bool, string) {
		return len(e.Entries("-u", daemonUnit, sourceRecoveredID)) > 0, "none yet"
	})
}

// flexiq's Postgres tables as its Diesel schema declares them
// (crates/flexiq-core/src/storage/schema.rs: jobs, queue_state, workers),
// in schema flexiq (PostgresStorage::new), owned by the role the source
// connects as.
const flexiqPgSchema = `
DROP SCHEMA IF EXISTS flexiq CASCADE;
CREATE SCHEMA flexiq AUTHORIZATION flexiq;
SET search_path TO flexiq;
CREATE TABLE jobs (
	id TEXT PRIMARY KEY, queue TEXT NOT NULL, task_name TEXT NOT NULL, payload BYTEA NOT NULL,
	status INTEGER NOT NULL, priority INTEGER NOT NULL, created_at BIGINT NOT NULL,
	scheduled_at BIGINT NOT NULL, started_at BIGINT, completed_at BIGINT,
	retry_count INTEGER NOT NULL DEFAULT 0, max_retries INTEGER NOT NULL DEFAULT 3, result BYTEA,
	error TEXT, timeout_ms BIGINT NOT NULL DEFAULT 300000, unique_key TEXT, progress INTEGER,
	metadata TEXT, notes TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0, expires_at BIGINT,
	result_ttl_ms BIGINT, namespace TEXT, has_deps BOOLEAN NOT NULL DEFAULT false, topic TEXT,
	subscription_name TEXT, debounce_key TEXT, enqueued_by TEXT);
CREATE TABLE queue_state (
	queue_name TEXT NOT NULL, paused BOOLEAN NOT NULL DEFAULT false, paused_at BIGINT, namespace TEXT);
CREATE TABLE workers (
	worker_id TEXT PRIMARY KEY, last_heartbeat BIGINT NOT NULL, queues TEXT NOT NULL, status TEXT NOT NULL,
	tags TEXT, resources TEXT, resource_health TEXT, threads INTEGER NOT NULL, started_at BIGINT,
	hostname TEXT, pid INTEGER, pool_type TEXT, sdk TEXT, sdk_version TEXT, registry_fingerprint TEXT,
	namespace TEXT);
ALTER TABLE jobs OWNER TO flexiq; ALTER TABLE queue_state OWNER TO flexiq; ALTER TABLE workers OWNER TO flexiq;
`

// pgJobs inserts n jobs as flexiq's enqueue does (one row of jobs).
func pgJobs(n int, queue string, status int, scheduledAtMs int64, namespace string) string {
	ns := "NULL"
	if namespace != "" {
		ns = "'" + namespace + "'"
	}
	return fmt.Sprintf(`INSERT INTO flexiq.jobs (id, queue, task_name, payload, status, priority, created_at, scheduled_at, namespace)
SELECT '%[1]s-' || i || '-' || md5(random()::text), '%[1]s', 't', '\x'::bytea, %[2]d, 0, %[3]d, %[3]d, %[4]s FROM generate_series(1, %[5]d) AS i;`,
		queue, status, scheduledAtMs, ns, n)
}

func TestFlexiqPostgresSource(t *testing.T) {
	parallel(t)
	const pool = "fpg"
	e := setup(t)
	url := servers.Postgres(t, e.SB, "flexiq", "pw")
	servers.PSQL(t, e.SB, "flexiq", flexiqPgSchema)
	e.Sh(`umask 077; printf pw > /etc/flexiq-scaled/pg.pw; printf wrong > /etc/flexiq-scaled/pg-wrong.pw`)
	src := fmt.Sprintf("type = \"flexiq-postgres\"\nurl = %q\npassword_file = \"/etc/flexiq-scaled/pg.pw\"\nqueues = [\"default\", \"held\"]", url)
	e.Configure(netPool(pool, src))

	// Future-scheduled and paused work is ignored; running is counted.
	now := time.Now().UnixMilli()
	servers.PSQL(t, e.SB, "flexiq", pgJobs(3, "default", 0, now-60_000, "")+
		pgJobs(7, "default", 0, now+3_600_000, "")+ // an hour ahead
		pgJobs(2, "default", 1, now-1000, "")+
		pgJobs(4, "held", 0, now-1000, "")+
		pgJobs(5, "other", 0, now-1000, "")+ // not the pool's queue
		`INSERT INTO flexiq.queue_state (queue_name, paused, namespace) VALUES ('held', true, NULL);`)
	o := e.mustObserve(pool)
	if o.Pending != 3 || o.Running != 2 || o.Paused != 4 {
		t.Errorf("observe = %+v, want 3 pending, 2 running, 4 paused", o)
	}
	if o.OldestAgeSec == nil || *o.OldestAgeSec < 55 || *o.OldestAgeSec > 300 {
		t.Errorf("oldest_age_sec = %v, want about 60", o.OldestAgeSec)
	}
	// A pause in another namespace does not hold the default namespace's
	// queue (flexiq's m0020 rule, as for SQLite).
	servers.PSQL(t, e.SB, "flexiq", `UPDATE flexiq.queue_state SET namespace = 'acme'`)
	if o := e.mustObserve(pool); o.Pending != 7 || o.Paused != 0 {
		t.Errorf("after moving the pause to namespace acme: %+v, want 7 pending, 0 paused", o)
	}
	// An older flexiq's queue_state: without a namespace column (before
	// m0020) a pause holds the queue in every namespace; without the table,
	// nothing is paused.
	servers.PSQL(t, e.SB, "flexiq", `ALTER TABLE flexiq.queue_state DROP COLUMN namespace`)
	if o := e.mustObserve(pool); o.Pending != 3 || o.Paused != 4 {
		t.Errorf("queue_state without namespace: %+v, want 3 pending, 4 paused", o)
	}
	servers.PSQL(t, e.SB, "flexiq", `DROP TABLE flexiq.queue_state`)
	if o := e.mustObserve(pool); o.Pending != 7 || o.Paused != 0 {
		t.Errorf("no queue_state: %+v, want 7 pending, 0 paused", o)
	}
	servers.PSQL(t, e.SB, "flexiq", `DELETE FROM flexiq.jobs;
CREATE TABLE flexiq.queue_state (queue_name TEXT NOT NULL, paused BOOLEAN NOT NULL DEFAULT false, paused_at BIGINT, namespace TEXT);
ALTER TABLE flexiq.queue_state OWNER TO flexiq;`)

	// threads_per_worker = "auto": the live workers serving the pool's
	// queues (diesel_common/workers.rs: last_heartbeat in ms, queues
	// comma-separated, threads, namespace).
	if n, ok := e.threads(pool); ok {
		t.Errorf("threads with no workers: %d, ok; want not ok", n)
	}
	servers.PSQL(t, e.SB, "flexiq", fmt.Sprintf(`INSERT INTO flexiq.workers (worker_id, last_heartbeat, queues, status, threads, namespace) VALUES
	('live', %[1]d, 'sms,default', 'active', 6, NULL),
	('stale', %[2]d, 'default', 'active', 2, NULL),
	('elsewhere', %[1]d, 'video', 'active', 1, NULL),
	('tenant', %[1]d, 'default', 'active', 3, 'acme');`, time.Now().UnixMilli(), time.Now().Add(-time.Minute).UnixMilli()))
	if n, ok := e.threads(pool); !ok || n != 3 {
		t.Errorf("threads = %d, %v; want 3 (the fewest of the live workers on the pool's queues, any namespace)", n, ok)
	}
	e.Configure(netPool(pool, src+"\nnamespace = \"acme\""))
	if n, ok := e.threads(pool); !ok || n != 3 {
		t.Errorf("threads in namespace acme = %d, %v; want 3", n, ok)
	}
	servers.PSQL(t, e.SB, "flexiq", `DELETE FROM flexiq.workers WHERE worker_id = 'tenant'`)
	e.Configure(netPool(pool, src))
	if n, ok := e.threads(pool); !ok || n != 6 {
		t.Errorf("threads = %d, %v; want 6", n, ok)
	}

	// Wrong credentials: an error naming the source, the server and
	// authentication.
	e.Configure(netPool(pool, strings.Replace(src, "pg.pw", "pg-wrong.pw", 1)))
	if _, errOut, _ := e.observe(pool); !strings.Contains(errOut, "flexiq-postgres") ||
		!strings.Contains(errOut, "127.0.0.1:5432") || !strings.Contains(errOut, "authentication") {
		t.Errorf("with a wrong password, observe said %q", errOut)
	}
	e.Configure(netPool(pool, src))

	// A burst scales the pool up; deleting the jobs scales it back down.
	e.StartDaemon()
	servers.PSQL(t, e.SB, "flexiq", pgJobs(20, "default", 0, time.Now().UnixMilli(), ""))
	e.waitWorkers(pool, 4, 20*time.Second)
	servers.PSQL(t, e.SB, "flexiq", `DELETE FROM flexiq.jobs`)
	e.waitWorkers(pool, 0, 30*time.Second)

	// The server stopped mid-run: hold, then recover.
	servers.PSQL(t, e.SB, "flexiq", pgJobs(3, "default", 0, time.Now().UnixMilli(), ""))
	e.waitWorkers(pool, 1, 20*time.Second)
	cluster := strings.TrimSpace(e.Sh(`pg_lsclusters -h | awk '{print $1"-"$2; exit}'`))
	e.holdAndRecover(pool, "postgresql@"+cluster+".service", "flexiq-postgres", "127.0.0.1:5432", nil)
}

// redisJobs lays down n jobs of one queue as flexiq's RedisStorage::enqueue
// does (redis_backend/jobs/enqueue.rs): the job document, the status set,
// the queue's pending sorted set scored dequeue_score (jobs/mod.rs; a
// running job has left it, jobs/dequeue.rs), by_queue, by_ns
// (jobs/helpers.rs) and the all index.
func (e *env) redisJobs(n int, queue string, status, priority int, scheduledAtMs int64, namespace string) {
	e.T.Helper()
	seg := "-"
	if namespace != "" {
		seg = fmt.Sprintf("%d:%s", len(namespace), namespace)
	}
	p := min(max(priority, 0), 999)
	score := fmt.Sprintf("%.0f", float64(int64(1000-p)*10_000_000_000_000+scheduledAtMs))
	var cmds strings.Builder
	for i := range n {
		id := fmt.Sprintf("%s-%d-%d-%d", queue, status, scheduledAtMs, i)
		fmt.Fprintf(&cmds, "SET flexiq:job:%s '{\"id\":\"%s\",\"queue\":\"%s\",\"status\":%d,\"scheduled_at\":%d}'\n", id, id, queue, status, scheduledAtMs)
		fmt.Fprintf(&cmds, "SADD flexiq:jobs:status:%d %s\nSADD flexiq:jobs:by_queue:%s %s\nSADD flexiq:jobs:by_ns:%s %s\nZADD flexiq:jobs:all -%d %s\n",
			status, id, queue, id, seg, id, scheduledAtMs, id)
		if status == 0 {
			fmt.Fprintf(&cmds, "ZADD flexiq:queue:%s:pending %s %s\n", queue, score, id)
		}
	}
	e.Write("/root/redis-cmds.txt", cmds.String())
	e.Sh("redis-cli < /root/redis-cmds.txt > /dev/null")
}

func TestFlexiqRedisSource(t *testing.T) {
	parallel(t)
	const pool = "fredis"
	e := setup(t)
	servers.Redis(t, e.SB)
	servers.RedisCLI(t, e.SB, "FLUSHALL")
	// A user with a password, so that a wrong one is refused.
	addUser := func() {
		servers.RedisCLI(t, e.SB, "ACL", "SETUSER", "flexiq", "reset", "on", ">pw", "~*", "&*", "+@all")
	}
	addUser()
	e.Sh(`umask 077; printf pw > /etc/flexiq-scaled/redis.pw; printf wrong > /etc/flexiq-scaled/redis-wrong.pw`)
	src := "type = \"flexiq-redis\"\nurl = \"redis://flexiq@127.0.0.1:6379/0\"\npassword_file = \"/etc/flexiq-scaled/redis.pw\"\nqueues = [\"default\", \"held\"]"
	e.Configure(netPool(pool, src))

	now := time.Now().UnixMilli()
	e.redisJobs(3, "default", 0, 0, now-60_000, "")
	e.redisJobs(2, "default", 0, 50, now-1_000, "")                   // another band, past 2^53
	e.redisJobs(6, "default", 0, 0, now+3_600_000, "")                // an hour ahead
	e.redisJobs(1, "default", 0, 999, now+10_000, "")                 // lowest priority, ahead
	e.redisJobs(2, "default", 1, 0, now-1_000, "")                    // running
	e.redisJobs(4, "held", 0, 0, now-1_000, "")                       // paused below
	e.redisJobs(5, "other", 0, 0, now-1_000, "")                      // not the pool's
	servers.RedisCLI(t, e.SB, "SADD", "flexiq:queues:paused", "held") // queue_state.rs
	o := e.mustObserve(pool)
	if o.Pending != 5 || o.Running != 2 || o.Paused != 4 {
		t.Errorf("observe = %+v, want 5 pending, 2 running, 4 paused", o)
	}
	if o.OldestAgeSec == nil || *o.OldestAgeSec < 55 || *o.OldestAgeSec > 300 {
		t.Errorf("oldest_age_sec = %v, want about 60", o.OldestAgeSec)
	}
	// A namespace: only its own jobs count, and its own pauses.
	e.redisJobs(2, "default", 0, 0, now-1_000, "acme")
	e.Configure(netPool(pool, src+"\nnamespace = \"acme\""))
	if o := e.mustObserve(pool); o.Pending != 2 || o.Running != 0 {
		t.Errorf("namespace acme: %+v, want 2 pending, 0 running", o)
	}
	// threads_per_worker = "auto": workers as register_worker writes them
	// (redis_backend/workers.rs: worker:ID hashes listed in workers:all,
	// namespace as its segment).
	e.Configure(netPool(pool, src))
	if n, ok := e.threads(pool); ok {
		t.Errorf("threads with no workers: %d, ok; want not ok", n)
	}
	live, stale := fmt.Sprint(time.Now().UnixMilli()), fmt.Sprint(time.Now().Add(-time.Minute).UnixMilli())
	servers.RedisCLI(t, e.SB, "HSET", "flexiq:worker:w1", "last_heartbeat", live, "queues", "default", "threads", "8", "namespace", "-")
	servers.RedisCLI(t, e.SB, "HSET", "flexiq:worker:w2", "last_heartbeat", stale, "queues", "default", "threads", "2", "namespace", "-")
	servers.RedisCLI(t, e.SB, "HSET", "flexiq:worker:w3", "last_heartbeat", live, "queues", "video", "threads", "1", "namespace", "-")
	servers.RedisCLI(t, e.SB, "HSET", "flexiq:worker:w4", "last_heartbeat", live, "queues", "held,x", "threads", "5", "namespace", "4:acme")
	servers.RedisCLI(t, e.SB, "SADD", "flexiq:workers:all", "w1", "w2", "w3", "w4")
	if n, ok := e.threads(pool); !ok || n != 5 {
		t.Errorf("threads = %d, %v; want 5 (the fewest of the live workers on the pool's queues)", n, ok)
	}
	e.Configure(netPool(pool, src+"\nnamespace = \"acme\""))
	if n, ok := e.threads(pool); !ok || n != 5 {
		t.Errorf("threads in namespace acme = %d, %v; want 5", n, ok)
	}
	servers.RedisCLI(t, e.SB, "SREM", "flexiq:workers:all", "w4")
	e.Configure(netPool(pool, src))
	if n, ok := e.threads(pool); !ok || n != 8 {
		t.Errorf("threads = %d, %v; want 8", n, ok)
	}

	// A key of the wrong type is an error, not a zero.
	servers.RedisCLI(t, e.SB, "SET", "flexiq:queue:held:pending", "x")
	e.Configure(netPool(pool, src))
	if _, errOut, _ := e.observe(pool); !strings.Contains(errOut, "flexiq-redis") || !strings.Contains(errOut, "wrong") {
		t.Errorf("with a string for a pending set, observe said %q", errOut)
	}
	servers.RedisCLI(t, e.SB, "FLUSHALL")

	// Wrong credentials.
	e.Configure(netPool(pool, strings.Replace(src, "redis.pw", "redis-wrong.pw", 1)))
	if _, errOut, _ := e.observe(pool); !strings.Contains(errOut, "flexiq-redis") ||
		!strings.Contains(errOut, "127.0.0.1:6379") || !strings.Contains(errOut, "authentication") {
		t.Errorf("with a wrong password, observe said %q", errOut)
	}
	e.Configure(netPool(pool, src))

	// A burst scales the pool up; deleting the jobs scales it back down.
	e.StartDaemon()
	e.redisJobs(20, "default", 0, 0, time.Now().UnixMilli(), "")
	e.waitWorkers(pool, 4, 20*time.Second)
	servers.RedisCLI(t, e.SB, "FLUSHALL")
	e.waitWorkers(pool, 0, 30*time.Second)

	// The server stopped mid-run: hold, then recover.
	e.redisJobs(3, "default", 0, 0, time.Now().UnixMilli(), "")
	e.waitWorkers(pool, 1, 20*time.Second)
	e.holdAndRecover(pool, "redis-server.service", "flexiq-redis", "127.0.0.1:6379", func() {
		// The user is not saved: a restarted server has lost it.
		servers.Redis(t, e.SB)
		addUser()
	})
}
