package config

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
