package source

// TypeGoodJob is the good_job preset.
const TypeGoodJob = "good_job"

// good_job (github.com/bensheldon/good_job), an ActiveJob backend for Rails.
// Its table good_jobs (lib/generators/good_job/templates/install/migrations/
// create_good_jobs.rb.erb) holds one row per job: unfinished while
// finished_at IS NULL; started (running) once performed_at is set; ready
// when not started and scheduled_at (or created_at when not scheduled) has
// come (GoodJob::Job's queued and only_scheduled scopes, app/models/good_job/
// job.rb). A retry puts the same row back with performed_at cleared and a
// later scheduled_at.
//
// Pauses (GoodJob.pause, good_job 4.x) are one good_job_settings row, key
// 'pauses', value {"queues": [...], "job_classes": [...], "labels": [...]}
// (app/models/good_job/setting.rb). Ready jobs of a paused queue or job
// class are paused, not pending (labels are not looked at). good_job has no
// schema setting: its tables are wherever the Rails connection's
// search_path finds them, which the URL's options can set.
func init() {
	definePgPreset(pgPresetDef{name: TypeGoodJob, schema: "", doc: "Reads good_job's good_jobs (Rails): unstarted jobs whose time has come are pending, performed ones running; jobs of a paused queue or job class (the pauses setting) are paused. good_job has no schema setting: its tables are wherever the connection's search_path finds them.",
		query: func(string) string {
			const ready = `j.performed_at IS NULL AND coalesce(j.scheduled_at, j.created_at) <= now()`
			const paused = `(j.queue_name IN (SELECT jsonb_array_elements_text(p.value->'queues') FROM p)
      OR j.job_class IN (SELECT jsonb_array_elements_text(p.value->'job_classes') FROM p))`
			return `WITH p AS (SELECT value FROM good_job_settings WHERE key = 'pauses')
SELECT
  count(*) FILTER (WHERE ` + ready + ` AND NOT ` + paused + `) AS pending,
  count(*) FILTER (WHERE j.performed_at IS NOT NULL) AS running,
  count(*) FILTER (WHERE ` + ready + ` AND ` + paused + `) AS paused,
  extract(epoch FROM now() - min(coalesce(j.scheduled_at, j.created_at)) FILTER (WHERE ` + ready + ` AND NOT ` + paused + `)) AS oldest_age_sec
FROM good_jobs j
WHERE j.finished_at IS NULL
  AND ($1::text[] IS NULL OR j.queue_name = ANY($1::text[]))`
		}})
}
