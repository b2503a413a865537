package source

// TypeRiver is the river preset.
const TypeRiver = "river"

// River (github.com/riverqueue/river), a Go job queue. Its tables, from its
// migrations (riverdriver/riverpgxv5/migration/main/002_initial_schema.up.sql
// for river_job and the river_job_state enum, 004_pending_and_more.up.sql for
// river_queue and its paused_at):
//
//   - river_job(state, queue, scheduled_at, ...): a worker fetches
//     state = 'available' AND scheduled_at <= now() (JobGetAvailable in
//     riverdriver/riverpgxv5/internal/dbsqlc/river_job.sql); 'scheduled'
//     and 'retryable' jobs whose scheduled_at has come are made
//     'available' by the leader's scheduler within seconds, so they are
//     ready too. 'pending' jobs wait on something else (a workflow) and
//     are not.
//   - 'running' jobs are being worked.
//   - river_queue(name, paused_at): a queue with paused_at set is paused
//     (Client.QueuePause); its ready jobs are paused, not pending.
//
// The schema is the one River's client was given (Config.Schema), public by
// default. The oldest age is since scheduled_at (insertion time when not
// scheduled).
//
// River notifies its inserts on the channel SCHEMA.river_insert
// (NotificationTopicInsert in internal/notifier/notifier.go, sent by
// PGNotifyMany in riverdriver/riverpgxv5/internal/dbsqlc/pg_misc.sql, which
// prefixes the schema): the source LISTENs there to wake its pool.
func init() {
	definePgPreset(pgPresetDef{name: TypeRiver, schema: "public", doc: "Reads River's tables (Go): available, and scheduled or retryable jobs whose time has come, are pending; running jobs running; a paused queue's ready jobs paused. The schema is the one River's client was given.",
		query: func(schema string) string {
			const ready = `j.state IN ('available', 'scheduled', 'retryable') AND j.scheduled_at <= now()`
			return `SELECT
  count(*) FILTER (WHERE ` + ready + ` AND q.paused_at IS NULL) AS pending,
  count(*) FILTER (WHERE j.state = 'running') AS running,
  count(*) FILTER (WHERE ` + ready + ` AND q.paused_at IS NOT NULL) AS paused,
  extract(epoch FROM now() - min(j.scheduled_at) FILTER (WHERE ` + ready + ` AND q.paused_at IS NULL)) AS oldest_age_sec
FROM ` + schema + `.river_job j
LEFT JOIN ` + schema + `.river_queue q ON q.name = j.queue
WHERE j.state IN ('available', 'scheduled', 'retryable', 'running')
  AND ($1::text[] IS NULL OR j.queue = ANY($1::text[]))`
		}, channel: func(schema string) string { return schema + ".river_insert" }})
}
