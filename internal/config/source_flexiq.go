package config

import "regexp"

// Source types of the flexiq network family, which live in this file. They
// read flexiq's own storage (crates/flexiq-core/src/storage/ in flexiq's
// repository): postgres/ and diesel_common/ for flexiq-postgres,
// redis_backend/ for flexiq-redis.
const (
	SourceFlexiqPostgres = "flexiq-postgres"
)

// Defaults of flexiq's own storage: PostgresStorage::new uses schema
// "flexiq" (storage/postgres/mod.rs) and RedisStorage::new the key prefix
// "flexiq:" (storage/redis_backend/mod.rs).
const (
	DefaultFlexiqSchema = "flexiq"
)

func init() {
	registerSource(sourceKind{
		name:  SourceFlexiqPostgres,
		keys:  append([]string{"queues", "namespace", "schema"}, connKeys...),
		check: checkFlexiqNet,
	})
}

// flexiqSchemaRE is what flexiq's validate_schema_name accepts
// (storage/postgres/mod.rs): ASCII letters, digits and underscores.
var flexiqSchemaRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

func checkFlexiqNet(l *loader, s *Source, r *rawSource, key func(string) string) {
	l.queues(s, r, key)
	l.str(key("namespace"), r.Namespace, &s.Namespace)
	switch s.Type {
	case SourceFlexiqPostgres:
		l.conn(s, r, key, "postgres", "postgresql")
		s.Schema = DefaultFlexiqSchema
		if l.str(key("schema"), r.Schema, &s.Schema) && !flexiqSchemaRE.MatchString(s.Schema) {
			l.add(key("schema"), "%q: flexiq takes only letters, digits and underscores", s.Schema)
		}
	}
}

// threadsAutoSources are the source types that can read threads_per_worker
// from flexiq's workers table or registry.
var threadsAutoSources = []string{SourceFlexiqPostgres}

// DefaultThreadsFallback is the threads_per_worker that "auto" falls back
// to when no live worker says: flexiq's own default (AutoscaleConfig), as for
// a pool that sets nothing.
const DefaultThreadsFallback = 4

// threads reads threads_per_worker: a count, or "auto" with an optional
// threads_per_worker_fallback.
func (l *loader) threads(p *Pool, r *rawPool, key func(...string) string) {
	if s, ok := r.ThreadsPerWorker.raw.(string); ok && s == "auto" {
		p.ThreadsAuto = true
		p.ThreadsPerWorker = DefaultThreadsFallback
		if l.integer(key("threads_per_worker_fallback"), r.ThreadsPerWorkerFallback, &p.ThreadsPerWorker) && p.ThreadsPerWorker < 1 {
			l.add(key("threads_per_worker_fallback"), "must be >= 1")
		}
		return
	}
	if r.ThreadsPerWorkerFallback.set() {
		l.add(key("threads_per_worker_fallback"), `only with threads_per_worker = "auto"`)
	}
	if _, isString := r.ThreadsPerWorker.raw.(string); isString {
		l.add(key("threads_per_worker"), `want an integer or "auto"`)
		return
	}
	if l.integer(key("threads_per_worker"), r.ThreadsPerWorker, &p.ThreadsPerWorker) && p.ThreadsPerWorker < 1 {
		l.add(key("threads_per_worker"), "must be >= 1")
	}
}

// effectiveThreads is threads_per_worker as written back: "auto" or the count.
func effectiveThreads(p *Pool) any {
	if p.ThreadsAuto {
		return "auto"
	}
	return p.ThreadsPerWorker
}

func effectiveThreadsFallback(p *Pool) int {
	if p.ThreadsAuto {
		return p.ThreadsPerWorker
	}
	return 0
}
