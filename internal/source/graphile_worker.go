package source

// TypeGraphileWorker is the graphile-worker preset.
const TypeGraphileWorker = "graphile-worker"

// graphile-worker (github.com/graphile/worker), a Node.js job queue, from
// version 0.16 on, whose tables are private (sql/000011.sql and later
// migrations: _private_jobs, _private_job_queues, _private_tasks). A worker
// takes a job (src/sql/getJob.ts) that is
//
//	locked_at IS NULL AND attempts < max_attempts (is_available)
//	AND run_at <= now()
//	AND (job_queue_id IS NULL OR its job queue is not locked)
//
// A named job queue runs its jobs one at a time: its queue is locked while
// one of them runs. So a named queue adds at most one ready job, however
// many it holds; jobs without a queue each count. Locked jobs are running,
// unless their lock is older than the 4 hours after which graphile-worker
// considers its worker dead. There is no queue pausing. queues filters by
// job queue name (jobs without one are then left out). The schema is
// graphile-worker's schema option, graphile_worker by default.
//
// add_job and add_jobs notify the channel jobs:insert (sql/000018.sql:
// pg_notify('jobs:insert', ...)), whatever the schema: the source LISTENs
// there to wake its pool.
func init() {
	definePgPreset(pgPresetDef{name: TypeGraphileWorker, schema: "graphile_worker", doc: "Reads graphile-worker's tables (Node.js, 0.16 on): a named job queue adds at most one ready job, since it runs its jobs one at a time; locked jobs are running. There is no queue pausing; queues filters by job queue name.",
		query: func(schema string) string {
			const ready = `j.locked_at IS NULL AND j.attempts < j.max_attempts AND j.run_at <= now() AND q.locked_at IS NULL`
			return `WITH r AS (
  SELECT j.job_queue_id, j.run_at
  FROM ` + schema + `._private_jobs j
  LEFT JOIN ` + schema + `._private_job_queues q ON q.id = j.job_queue_id
  WHERE ` + ready + `
    AND ($1::text[] IS NULL OR q.queue_name = ANY($1::text[]))
)
SELECT
  (SELECT count(*) FROM r WHERE job_queue_id IS NULL)
    + (SELECT count(DISTINCT job_queue_id) FROM r WHERE job_queue_id IS NOT NULL) AS pending,
  (SELECT count(*)
     FROM ` + schema + `._private_jobs j
     LEFT JOIN ` + schema + `._private_job_queues q ON q.id = j.job_queue_id
    WHERE j.locked_at IS NOT NULL AND j.locked_at > now() - interval '4 hours'
      AND ($1::text[] IS NULL OR q.queue_name = ANY($1::text[]))) AS running,
  (SELECT extract(epoch FROM now() - min(run_at)) FROM r) AS oldest_age_sec`
		}, channel: func(string) string { return "jobs:insert" }})
}
