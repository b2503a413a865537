package source

// TypePgBoss is the pg-boss preset.
const TypePgBoss = "pg-boss"

// pg-boss (github.com/timgit/pg-boss), a Node.js job queue. Its job table
// (src/plans.js: create(), the job table and the job_state enum created,
// retry, active, completed, cancelled, failed) holds every queue's jobs by
// name. A worker fetches (fetchNextJob in src/plans.js)
//
//	WHERE name = $queue AND state < 'active' AND start_after < now()
//
// that is created or retry jobs whose start_after has come: pending.
// 'active' jobs are running. pg-boss has no queue pausing. The schema is
// pg-boss's schema option, pgboss by default. The oldest age is since
// start_after (the insertion time when not deferred).
func init() {
	definePgPreset(pgPresetDef{name: TypePgBoss, schema: "pgboss", doc: "Reads pg-boss's job table (Node.js): created or retry jobs whose start_after has come are pending, active ones running. pg-boss has no queue pausing.",
		query: func(schema string) string {
			const ready = `j.state < 'active' AND j.start_after < now()`
			return `SELECT
  count(*) FILTER (WHERE ` + ready + `) AS pending,
  count(*) FILTER (WHERE j.state = 'active') AS running,
  extract(epoch FROM now() - min(j.start_after) FILTER (WHERE ` + ready + `)) AS oldest_age_sec
FROM ` + schema + `.job j
WHERE j.state <= 'active'
  AND ($1::text[] IS NULL OR j.name = ANY($1::text[]))`
		}})
}
