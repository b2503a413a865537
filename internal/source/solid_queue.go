package source

// TypeSolidQueue is the solid-queue preset.
const TypeSolidQueue = "solid-queue"

// Solid Queue (github.com/rails/solid_queue), Rails' database-backed
// ActiveJob backend. Its schema (lib/generators/solid_queue/install/
// templates/db/queue_schema.rb) keeps a job's state as the execution table
// it sits in:
//
//   - solid_queue_ready_executions(queue_name, created_at): ready; workers
//     claim from here (SolidQueue::ReadyExecution.claim);
//   - solid_queue_scheduled_executions(queue_name, scheduled_at): the
//     dispatcher moves due ones to ready every second
//     (SolidQueue::ScheduledExecution.dispatch_next_batch), so due ones are
//     ready too;
//   - solid_queue_claimed_executions(job_id): running;
//   - solid_queue_pauses(queue_name): a paused queue (SolidQueue::Queue#pause),
//     whose ready jobs are paused, not pending.
//
// Blocked executions (concurrency limits) are not ready. Solid Queue has no
// schema setting. The oldest age is since the ready execution's created_at
// (or the scheduled time).
func init() {
	definePgPreset(pgPresetDef{name: TypeSolidQueue, schema: "", doc: "Reads Solid Queue's execution tables (Rails): ready and due scheduled executions are pending, claimed ones running, a paused queue's ready ones paused. Solid Queue has no schema setting.",
		query: func(string) string {
			const inQueues = `($1::text[] IS NULL OR queue_name = ANY($1::text[]))`
			return `WITH r AS (
  SELECT queue_name, created_at AS since FROM solid_queue_ready_executions WHERE ` + inQueues + `
  UNION ALL
  SELECT queue_name, scheduled_at FROM solid_queue_scheduled_executions WHERE scheduled_at <= now() AND ` + inQueues + `
), rp AS (
  SELECT since, queue_name IN (SELECT queue_name FROM solid_queue_pauses) AS paused FROM r
)
SELECT
  (SELECT count(*) FROM rp WHERE NOT paused) AS pending,
  (SELECT count(*) FROM solid_queue_claimed_executions c JOIN solid_queue_jobs j ON j.id = c.job_id
    WHERE ($1::text[] IS NULL OR j.queue_name = ANY($1::text[]))) AS running,
  (SELECT count(*) FROM rp WHERE paused) AS paused,
  (SELECT extract(epoch FROM now() - min(since)) FROM rp WHERE NOT paused) AS oldest_age_sec`
		}})
}
