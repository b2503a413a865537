package source

// TypeOban is the oban preset.
const TypeOban = "oban"

// Oban (github.com/oban-bg/oban), an Elixir job queue. Its table oban_jobs
// and the oban_job_state enum (available, scheduled, executing, retryable,
// completed, discarded, cancelled) come from lib/oban/migrations/postgres/
// v01.ex onwards. A producer fetches state = 'available' jobs of its queue
// (fetch_jobs in lib/oban/engines/basic.ex); the stager
// (lib/oban/stager.ex) makes 'scheduled' and 'retryable' jobs whose
// scheduled_at has come 'available' every second, so those are ready too.
// 'executing' jobs are running. Oban's queue pausing lives in the running
// nodes' memory, not in the database, so it cannot be seen here. The schema
// is Oban's prefix option, public by default. The oldest age is since
// scheduled_at (set to the insertion time when not scheduled).
func init() {
	definePgPreset(pgPresetDef{name: TypeOban, schema: "public", doc: "Reads Oban's oban_jobs (Elixir): available, and scheduled or retryable jobs whose time has come, are pending; executing ones running. Oban's pauses live in its nodes' memory and are not seen. The schema is Oban's prefix option.",
		query: func(schema string) string {
			const ready = `(j.state = 'available' OR (j.state IN ('scheduled', 'retryable') AND j.scheduled_at <= now()))`
			return `SELECT
  count(*) FILTER (WHERE ` + ready + `) AS pending,
  count(*) FILTER (WHERE j.state = 'executing') AS running,
  extract(epoch FROM now() - min(j.scheduled_at) FILTER (WHERE ` + ready + `)) AS oldest_age_sec
FROM ` + schema + `.oban_jobs j
WHERE j.state IN ('available', 'scheduled', 'retryable', 'executing')
  AND ($1::text[] IS NULL OR j.queue = ANY($1::text[]))`
		}})
}
