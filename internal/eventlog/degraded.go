package eventlog

// The degraded state of issue 19 (…6b50 upward): a pool whose baseline
// (min_workers) replicas keep failing.
const (
	// PoolDegraded: the pool has fewer live workers than its baseline
	// because a slot keeps failing (once, when it enters the state).
	PoolDegraded Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b50"
	// PoolRecovered: the pool has held its baseline again long enough to
	// leave the degraded state (once).
	PoolRecovered Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b51"
)
