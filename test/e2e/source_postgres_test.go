package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
	"github.com/flexiq/flexiq-scaled/test/servers"
)

// The PostgreSQL sources against Debian's PostgreSQL 15 in the sandbox.
// pg-boss (10.4.2) and graphile-worker (0.16.6) come from the npm registry,
// River (v0.51.2, riverpgxv5) from the Go module proxy (test/clients/*):
// their own code lays down their schemas, enqueues, and pauses River's
// queue. Oban (Elixir), good_job and Solid Queue (Ruby) have no client
// installable here without their language's toolchain, so their tables are
// laid down below from their own migrations, with only the columns that
// matter, and jobs inserted as their clients write them.

const pgDB, pgPassword = "fq", "s3cret-pw"

// obanSchema: lib/oban/migrations/postgres/v01.ex and later (oban_jobs,
// oban_job_state; UTC timestamps without a zone), in prefix oban.
const obanSchema = `
CREATE SCHEMA oban;
CREATE TYPE oban.oban_job_state AS ENUM ('available', 'scheduled', 'executing', 'retryable', 'completed', 'discarded', 'cancelled');
CREATE TABLE oban.oban_jobs (
  id bigserial PRIMARY KEY,
  state oban.oban_job_state NOT NULL DEFAULT 'available',
  queue text NOT NULL DEFAULT 'default',
  worker text NOT NULL DEFAULT 'Work',
  args jsonb NOT NULL DEFAULT '{}',
  attempt integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL DEFAULT 20,
  inserted_at timestamp NOT NULL DEFAULT timezone('UTC', now()),
  scheduled_at timestamp NOT NULL DEFAULT timezone('UTC', now()),
  attempted_at timestamp,
  completed_at timestamp,
  priority integer NOT NULL DEFAULT 0);`

// goodJobSchema: lib/generators/good_job/templates/install/migrations/
// create_good_jobs.rb.erb (good_jobs, good_job_settings; Rails' datetime is
// a timestamp without a zone, in UTC).
const goodJobSchema = `
CREATE TABLE good_jobs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  queue_name text,
  priority integer,
  serialized_params jsonb,
  scheduled_at timestamp(6),
  performed_at timestamp(6),
  finished_at timestamp(6),
  error text,
  created_at timestamp(6) NOT NULL DEFAULT timezone('UTC', now()),
  updated_at timestamp(6) NOT NULL DEFAULT timezone('UTC', now()),
  active_job_id uuid,
  concurrency_key text,
  cron_key text,
  job_class text DEFAULT 'WorkJob',
  locked_by_id uuid,
  locked_at timestamp(6));
CREATE TABLE good_job_settings (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  created_at timestamp(6) NOT NULL DEFAULT timezone('UTC', now()),
  updated_at timestamp(6) NOT NULL DEFAULT timezone('UTC', now()),
  key text UNIQUE,
  value jsonb);`

// solidQueueSchema: lib/generators/solid_queue/install/templates/db/
// queue_schema.rb (the job table and one table per execution state).
const solidQueueSchema = `
CREATE TABLE solid_queue_jobs (
  id bigserial PRIMARY KEY,
  queue_name varchar NOT NULL,
  class_name varchar NOT NULL DEFAULT 'WorkJob',
  arguments text,
  priority integer NOT NULL DEFAULT 0,
  active_job_id varchar,
  scheduled_at timestamp(6),
  finished_at timestamp(6),
  concurrency_key varchar,
  created_at timestamp(6) NOT NULL DEFAULT timezone('UTC', now()),
  updated_at timestamp(6) NOT NULL DEFAULT timezone('UTC', now()));
CREATE TABLE solid_queue_ready_executions (
  id bigserial PRIMARY KEY,
  job_id bigint NOT NULL UNIQUE REFERENCES solid_queue_jobs ON DELETE CASCADE,
  queue_name varchar NOT NULL,
  priority integer NOT NULL DEFAULT 0,
  created_at timestamp(6) NOT NULL DEFAULT timezone('UTC', now()));
CREATE TABLE solid_queue_scheduled_executions (
  id bigserial PRIMARY KEY,
  job_id bigint NOT NULL UNIQUE REFERENCES solid_queue_jobs ON DELETE CASCADE,
  queue_name varchar NOT NULL,
  priority integer NOT NULL DEFAULT 0,
  scheduled_at timestamp(6) NOT NULL,
  created_at timestamp(6) NOT NULL DEFAULT timezone('UTC', now()));
CREATE TABLE solid_queue_claimed_executions (
  id bigserial PRIMARY KEY,
  job_id bigint NOT NULL UNIQUE REFERENCES solid_queue_jobs ON DELETE CASCADE,
  process_id bigint,
  created_at timestamp(6) NOT NULL DEFAULT timezone('UTC', now()));
CREATE TABLE solid_queue_pauses (
  id bigserial PRIMARY KEY,
  queue_name varchar NOT NULL UNIQUE,
  created_at timestamp(6) NOT NULL DEFAULT timezone('UTC', now()));`

// genericSchema is a home-made queue for postgres-query.
const genericSchema = `CREATE TABLE tasks (id bigserial PRIMARY KEY, tenant text NOT NULL, state text NOT NULL, run_at timestamptz NOT NULL DEFAULT now());`

// A pgSystem is one source type and how to put jobs into its tables:
// ready (age seconds ago), future (an hour ahead), running, and in a paused
// queue.
type pgSystem struct {
	typ, schema string
	// add returns SQL (or runs a client) adding n jobs of a kind to queue q.
	ready, future, running func(e *env, q string, n, ageSec int)
	pause                  func(e *env, q string) // nil: the system has no pausing
	clear                  string                 // SQL emptying its tables
}

func psql(e *env) func(sql string) {
	return func(sql string) { e.T.Helper(); servers.PSQL(e.T, e.SB, pgDB, sql) }
}

func rep(n int, stmt string) string { return strings.Repeat(stmt+";\n", n) }

// nodeOps batches the operations for the clients (pg-boss, graphile-worker,
// River): one process per client and phase, since node's start is the slow
// part.
type nodeOps map[string][]string

// flush runs the batched operations, in order, and forgets them.
func (ops nodeOps) flush(e *env, url string) {
	e.T.Helper()
	root, _ := sandbox.ModuleRoot()
	for _, client := range []string{"pgboss", "graphile-worker", "river"} {
		if _, any := ops[client]; !any {
			continue
		}
		schema := map[string]string{"pgboss": "pgboss", "graphile-worker": "graphile_worker", "river": "river"}[client]
		cmd := []string{"node", filepath.Join(root, "test/clients", client, "enqueue.js")}
		if client == "river" {
			cmd = []string{filepath.Join(binDir, "flexiq-river-client")}
		}
		full := append(append(cmd, strings.Replace(url, pgDB+"@", pgDB+":"+pgPassword+"@", 1), schema), ops[client]...)
		if out, err := e.SB.Exec(e.Ctx(), full...); err != nil {
			e.T.Fatalf("%s: %v\n%s", strings.Join(full[1:], " "), err, out)
		}
		delete(ops, client)
	}
}

func pgSystems(e *env, ops nodeOps) []pgSystem {
	q := psql(e)
	node := func(client string, op ...string) { ops[client] = append(ops[client], op...) }
	return []pgSystem{
		{typ: "river", schema: "river",
			ready: func(_ *env, qu string, n, age int) {
				// Scheduled in the past (due: ready), and one available.
				node("river", fmt.Sprintf("insert,%s,%d,%d", qu, n-1, -age), fmt.Sprintf("insert,%s,1", qu))
			},
			future:  func(_ *env, qu string, n, _ int) { node("river", fmt.Sprintf("insert,%s,%d,3600", qu, n)) },
			running: func(_ *env, qu string, n, _ int) { node("river", fmt.Sprintf("take,%s,%d", qu, n)) },
			pause:   func(_ *env, qu string) { node("river", "pause,"+qu) },
			clear:   "DELETE FROM river.river_job; DELETE FROM river.river_queue"},
		{typ: "pg-boss", schema: "pgboss",
			ready:  func(_ *env, qu string, n, age int) { node("pgboss", fmt.Sprintf("send,%s,%d,%d", qu, n, -age)) },
			future: func(_ *env, qu string, n, _ int) { node("pgboss", fmt.Sprintf("send,%s,%d,3600", qu, n)) },
			running: func(_ *env, qu string, n, _ int) {
				// Before any other job of qu, so that fetch takes these.
				node("pgboss", fmt.Sprintf("send,%s,%d", qu, n), fmt.Sprintf("fetch,%s,%d", qu, n))
			},
			clear: "DELETE FROM pgboss.job"},
		{typ: "graphile-worker", schema: "graphile_worker",
			ready:   func(_ *env, qu string, n, age int) { node("graphile-worker", fmt.Sprintf("add,%s,%d,%d", qu, n, -age)) },
			future:  func(_ *env, qu string, n, _ int) { node("graphile-worker", fmt.Sprintf("add,%s,%d,3600", qu, n)) },
			running: func(_ *env, qu string, n, _ int) { node("graphile-worker", fmt.Sprintf("take,%s,%d", qu, n)) },
			clear:   "DELETE FROM graphile_worker._private_jobs; DELETE FROM graphile_worker._private_job_queues"},
		{typ: "oban", schema: "oban",
			ready: func(_ *env, qu string, n, age int) {
				q(rep(n, fmt.Sprintf("INSERT INTO oban.oban_jobs (queue, scheduled_at) VALUES ('%s', timezone('UTC', now()) - interval '%d s')", qu, age)))
			},
			future: func(_ *env, qu string, n, _ int) {
				q(rep(n, fmt.Sprintf("INSERT INTO oban.oban_jobs (queue, state, scheduled_at) VALUES ('%s', 'scheduled', timezone('UTC', now()) + interval '1 hour')", qu)))
			},
			running: func(_ *env, qu string, n, _ int) {
				q(rep(n, fmt.Sprintf("INSERT INTO oban.oban_jobs (queue, state, attempt, attempted_at) VALUES ('%s', 'executing', 1, timezone('UTC', now()))", qu)))
			},
			clear: "DELETE FROM oban.oban_jobs"},
		{typ: "good_job",
			ready: func(_ *env, qu string, n, age int) {
				q(rep(n, fmt.Sprintf("INSERT INTO good_jobs (queue_name, scheduled_at, created_at) VALUES ('%s', timezone('UTC', now()) - interval '%d s', timezone('UTC', now()) - interval '%d s')", qu, age, age)))
			},
			future: func(_ *env, qu string, n, _ int) {
				q(rep(n, fmt.Sprintf("INSERT INTO good_jobs (queue_name, scheduled_at) VALUES ('%s', timezone('UTC', now()) + interval '1 hour')", qu)))
			},
			running: func(_ *env, qu string, n, _ int) {
				q(rep(n, fmt.Sprintf("INSERT INTO good_jobs (queue_name, scheduled_at, performed_at) VALUES ('%s', timezone('UTC', now()), timezone('UTC', now()))", qu)))
			},
			pause: func(_ *env, qu string) {
				q(fmt.Sprintf(`INSERT INTO good_job_settings (key, value) VALUES ('pauses', '{"queues": ["%s"], "job_classes": [], "labels": []}') ON CONFLICT DO NOTHING`, qu))
			},
			clear: "DELETE FROM good_jobs; DELETE FROM good_job_settings"},
		{typ: "solid-queue",
			ready: func(_ *env, qu string, n, age int) {
				q(rep(n, fmt.Sprintf(`WITH j AS (INSERT INTO solid_queue_jobs (queue_name) VALUES ('%[1]s') RETURNING id)
INSERT INTO solid_queue_ready_executions (job_id, queue_name, created_at) SELECT id, '%[1]s', timezone('UTC', now()) - interval '%[2]d s' FROM j`, qu, age)))
			},
			future: func(_ *env, qu string, n, _ int) {
				q(rep(n, fmt.Sprintf(`WITH j AS (INSERT INTO solid_queue_jobs (queue_name, scheduled_at) VALUES ('%[1]s', timezone('UTC', now()) + interval '1 hour') RETURNING id, scheduled_at)
INSERT INTO solid_queue_scheduled_executions (job_id, queue_name, scheduled_at) SELECT id, '%[1]s', scheduled_at FROM j`, qu)))
			},
			running: func(_ *env, qu string, n, _ int) {
				q(rep(n, fmt.Sprintf(`WITH j AS (INSERT INTO solid_queue_jobs (queue_name) VALUES ('%[1]s') RETURNING id)
INSERT INTO solid_queue_claimed_executions (job_id, process_id) SELECT id, 1 FROM j`, qu)))
			},
			pause: func(_ *env, qu string) {
				q(fmt.Sprintf("INSERT INTO solid_queue_pauses (queue_name) VALUES ('%s') ON CONFLICT DO NOTHING", qu))
			},
			clear: "DELETE FROM solid_queue_jobs; DELETE FROM solid_queue_pauses"},
	}
}

// npmCI installs a test client's packages from its lock file, once (see
// artefacts).
func npmCI(t testing.TB, client string) {
	t.Helper()
	need(t, "npm:"+client)
}

// pgSourceTOML is a pool of sleeping workers reading typ.
func pgSourceTOML(pool, typ, url, passwordFile, extra string) string {
	return fmt.Sprintf(`
[pools.%[1]s]
exec = ["/bin/sleep", "infinity"]
min_workers = 0
max_workers = 3
target_queue_depth_per_worker = 2
threads_per_worker = 1
target_utilisation = 1.0
poll_interval_sec = 1
scale_down_window_sec = 2
drain_timeout_sec = 2
[pools.%[1]s.source]
type = %[2]q
url = %[3]q
password_file = %[4]q
%[5]s
`, pool, typ, url, passwordFile, extra)
}

// Every PostgreSQL source reads its system's notion of "ready now": future
// work and paused queues are not pending, running jobs are running, the
// oldest ready job's age is reported; wrong credentials are a clear error.
// Then, against one daemon, every pool scales up on a burst, holds through
// the server's stop and recovers, and scales back down.
func TestPostgresSources(t *testing.T) {
	parallel(t)
	began := time.Now()
	e := setup(t)
	npmCI(t, "pgboss")
	npmCI(t, "graphile-worker")
	need(t, "flexiq-river-client")
	url := servers.Postgres(t, e.SB, pgDB, pgPassword)
	cluster := strings.TrimSpace(e.Sh("pg_lsclusters -h | awk '{print $1\"-\"$2; exit}'"))
	e.Sh(fmt.Sprintf("umask 077; printf '%%s\\n' %q > /etc/flexiq-scaled/pg.password; printf 'wrong\\n' > /etc/flexiq-scaled/bad.password", pgPassword))
	// A fresh database each run: the sandbox's overlay may keep the last one.
	q := psql(e)
	servers.PSQL(t, e.SB, "postgres", "DROP DATABASE IF EXISTS "+pgDB+" WITH (FORCE)")
	url = servers.Postgres(t, e.SB, pgDB, pgPassword)
	q("SET ROLE " + pgDB + ";\n" + obanSchema + goodJobSchema + solidQueueSchema + genericSchema)
	ops := nodeOps{}
	systems := pgSystems(e, ops)

	t.Logf("%s: phase 1", time.Since(began).Round(time.Millisecond))
	// 1. Counts, through observe.
	var cfg strings.Builder
	for _, s := range systems {
		extra := `queues = ["obs", "obs_paused"]`
		if s.typ == "graphile-worker" {
			extra = "" // every job: the unqueued ones and the serial queues
		}
		if s.typ == "river" || s.typ == "oban" {
			extra += fmt.Sprintf("\nschema = %q", s.schema)
		}
		cfg.WriteString(pgSourceTOML(strings.ReplaceAll(s.typ, "-", "_"), s.typ, url, "/etc/flexiq-scaled/pg.password", extra))
	}
	cfg.WriteString(pgSourceTOML("query", "postgres-query", url, "/etc/flexiq-scaled/pg.password", `query = """
SELECT count(*) FILTER (WHERE state = 'ready' AND run_at <= now()) AS pending,
       count(*) FILTER (WHERE state = 'running') AS running,
       extract(epoch FROM now() - min(run_at) FILTER (WHERE state = 'ready' AND run_at <= now())) AS oldest_age_sec
FROM tasks WHERE tenant = @tenant"""
params = { tenant = "acme" }`))
	cfg.WriteString(pgSourceTOML("badpw", "river", url, "/etc/flexiq-scaled/bad.password", `schema = "river"`))
	e.Configure(cfg.String())

	for _, s := range systems {
		qu := "obs"
		if s.typ == "graphile-worker" {
			qu = "-"
		}
		s.running(e, qu, 1, 0)
		s.ready(e, qu, 3, 60)
		s.future(e, qu, 2, 0)
		if s.pause != nil {
			s.ready(e, "obs_paused", 2, 30)
			s.pause(e, "obs_paused")
		}
		if s.typ == "graphile-worker" {
			s.ready(e, "serial", 3, 10) // a serial queue: one at a time
		}
		s.ready(e, "other", 5, 10) // a queue the pool does not read
	}
	q(`INSERT INTO tasks (tenant, state, run_at) SELECT 'acme', 'ready', now() - interval '60 s' FROM generate_series(1, 3);
INSERT INTO tasks (tenant, state, run_at) SELECT 'acme', 'ready', now() + interval '1 hour' FROM generate_series(1, 2);
INSERT INTO tasks (tenant, state) VALUES ('acme', 'running'), ('other', 'ready'), ('other', 'ready');`)

	ops.flush(e, url)
	for _, s := range append(systems, pgSystem{typ: "postgres-query"}) {
		pool := strings.ReplaceAll(s.typ, "-", "_")
		if s.typ == "postgres-query" {
			pool = "query"
		}
		want := observed{Pending: 3, Running: 1}
		if s.pause != nil {
			want.Paused = 2
		}
		if s.typ == "graphile-worker" {
			want.Pending = 3 + 1 + 1 // the serial queues "serial" and "other" add one each
		}
		got, out, err := e.observe(pool)
		switch {
		case err != nil:
			t.Errorf("%s: observe: %v\n%s", s.typ, err, out)
		case got.Pending != want.Pending || got.Running != want.Running || got.Paused != want.Paused:
			t.Errorf("%s: observe = %s, want pending %d running %d paused %d", s.typ, strings.TrimSpace(out), want.Pending, want.Running, want.Paused)
		case got.OldestAgeSec == nil || *got.OldestAgeSec < 55 || *got.OldestAgeSec > 120:
			t.Errorf("%s: oldest_age_sec in %s, want about 60", s.typ, strings.TrimSpace(out))
		}
	}
	// Wrong credentials: an error naming the type, the server (no password)
	// and what failed.
	if _, out, err := e.observe("badpw"); err == nil || !strings.Contains(out, "river source postgres://fq:xxxxx@127.0.0.1:5432/fq") ||
		!strings.Contains(out, "authentication failed") || strings.Contains(out, "wrong") {
		t.Errorf("observe with a wrong password: %v\n%s", err, out)
	}
	if t.Failed() {
		return
	}

	t.Logf("%s: phase 2", time.Since(began).Round(time.Millisecond))
	// 2. The daemon: nothing ready but future and paused work stays at 0.
	for _, s := range systems {
		q(s.clear)
		s.future(e, "obs", 4, 0)
		if s.pause != nil {
			s.ready(e, "obs_paused", 6, 5)
			s.pause(e, "obs_paused")
		}
	}
	ops.flush(e, url)
	q("DELETE FROM tasks; INSERT INTO tasks (tenant, state, run_at) SELECT 'acme', 'ready', now() + interval '1 hour' FROM generate_series(1, 4)")
	pools := []string{"query"}
	for _, s := range systems {
		pools = append(pools, strings.ReplaceAll(s.typ, "-", "_"))
	}
	e.StartDaemon()
	e.Eventually(15*time.Second, "a pending count for every pool in STATUS=", func() (bool, string) {
		st := e.UnitProp(daemonUnit, "StatusText")
		return strings.Count(st, "0 pending") >= len(pools), st
	})
	time.Sleep(2 * time.Second)
	for _, p := range pools {
		if ws := e.Workers(p, "active", "activating"); len(ws) != 0 {
			e.Errorf("pool %s: workers %v for future and paused work only, want none", p, ws)
		}
	}

	t.Logf("%s: phase 3", time.Since(began).Round(time.Millisecond))
	// 3. A burst: 6 ready jobs each, 2 per worker: 3 workers each.
	for _, s := range systems {
		qu := "obs"
		if s.typ == "graphile-worker" {
			qu = "-"
		}
		s.ready(e, qu, 6, 1)
	}
	ops.flush(e, url)
	q("INSERT INTO tasks (tenant, state) SELECT 'acme', 'ready' FROM generate_series(1, 6)")
	for _, p := range pools {
		e.waitWorkers(p, 3, 30*time.Second)
	}

	t.Logf("%s: phase 4", time.Since(began).Round(time.Millisecond))
	// 4. The server stops mid-run: every pool holds at 3, and says why.
	e.Sh("systemctl stop postgresql@" + cluster + ".service")
	e.Eventually(15*time.Second, "a source error for every pool", func() (bool, string) {
		var missing []string
		for _, p := range pools {
			if len(e.Entries("MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b05", "FLEXIQ_POOL="+p)) == 0 {
				missing = append(missing, p)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no error yet for %v", missing)
	})
	for _, en := range e.Entries("MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b05", "FLEXIQ_POOL=river") {
		if msg := en.Field("FLEXIQ_ERROR"); !strings.Contains(msg, "river source postgres://fq:xxxxx@127.0.0.1:5432/fq") || strings.Contains(msg, pgPassword) {
			t.Errorf("source error %q: want the type and the redacted server, never the password", msg)
		}
	}
	time.Sleep(3 * time.Second) // several held ticks
	for _, p := range pools {
		if ws := e.Workers(p, "active"); len(ws) != 3 {
			e.Errorf("pool %s with the server down: %d workers, want the 3 held", p, len(ws))
		}
	}
	e.Sh("systemctl start postgresql@" + cluster + ".service")
	e.Eventually(30*time.Second, "a recovery for every pool", func() (bool, string) {
		var missing []string
		for _, p := range pools {
			if len(e.Entries("MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b08", "FLEXIQ_POOL="+p)) == 0 {
				missing = append(missing, p)
			}
		}
		return len(missing) == 0, fmt.Sprintf("not recovered: %v", missing)
	})

	t.Logf("%s: phase 5", time.Since(began).Round(time.Millisecond))
	// 5. The work done: back down to 0. The wrong password held its pool
	// at 0 all along, with a clear error.
	for _, s := range systems {
		q(s.clear)
	}
	q("DELETE FROM tasks")
	for _, p := range pools {
		e.waitWorkers(p, 0, 30*time.Second)
	}
	bad := e.Entries("MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b05", "FLEXIQ_POOL=badpw")
	if len(bad) == 0 || !strings.Contains(bad[0].Field("FLEXIQ_ERROR"), "authentication failed") {
		e.Errorf("pool badpw: source errors %v, want one saying authentication failed", bad)
	}

	// 6. Wake-up: River's and graphile-worker's sources LISTEN where their
	// clients notify inserts (internal/source's TestPostgresWatchInserts,
	// run here, where the server is).
	t.Logf("%s: phase 6", time.Since(began).Round(time.Millisecond))
	root, _ := sandbox.ModuleRoot()
	full := strings.Replace(url, pgDB+"@", pgDB+":"+pgPassword+"@", 1)
	e.sourceTest("TestPostgresWatchInserts", "FLEXIQ_TEST_PG_URL="+full,
		fmt.Sprintf("FLEXIQ_TEST_PG_INSERT_river=%s %q river insert,wake,1", filepath.Join(binDir, "flexiq-river-client"), full),
		fmt.Sprintf("FLEXIQ_TEST_PG_INSERT_graphile-worker=node %s %q graphile_worker add,-,1", filepath.Join(root, "test/clients/graphile-worker/enqueue.js"), full))
}

// sourceTest runs internal/source's tests that need a server inside the
// sandbox (names: a -test.run alternation of whole names), with env
// (NAME=VALUE) set, and fails the test with its output unless each passes.
func (e *env) sourceTest(names string, env ...string) {
	e.T.Helper()
	bin := need(e.T, "flexiq-source.test")
	argv := append(append([]string{"env"}, env...), bin, "-test.run", "^("+names+")$", "-test.v", "-test.count=1", "-test.timeout=2m")
	out, err := e.SB.Exec(e.Ctx(), argv...)
	for _, name := range strings.Split(names, "|") {
		if err != nil || !strings.Contains(out, "--- PASS: "+name+" ") {
			e.Errorf("internal/source's %s: %v\n%s", name, err, out)
			return
		}
	}
}
