package units

import "time"

// The bounds that callers put on their D-Bus calls to systemd, kept here,
// beside the calls, so that the daemon and the controller agree on them.
// Each bounds one call through the caller's context; the calls themselves
// take no timeout, since only the caller knows what waits on it.
const (
	// CallTimeout bounds one round trip to systemd: a connect, a reset of
	// a failed unit, enqueueing a stop job, a kill, a property read, or a
	// pool's own listing at each tick. systemd answers these in
	// milliseconds; 15 s only goes by when PID 1 is stuck (a reload of a
	// large unit set, a swap storm), and then the caller logs, gives up
	// this attempt and retries at its next turn instead of hanging.
	CallTimeout = 15 * time.Second

	// ListTimeout bounds a listing of every pool's workers by the daemon
	// (at start, at a reload's adoption, in the final sweep): one
	// ListUnitsByPatterns call plus a property read for each worker not
	// yet cached, so at hundreds of workers after a restart it is many
	// round trips, and twice CallTimeout leaves room for them.
	ListTimeout = 30 * time.Second

	// StartTimeout bounds one start job of a worker (Type=exec: systemd
	// answers once the exec itself has happened), which can wait behind
	// the fork and exec on a loaded host longer than a plain round trip.
	StartTimeout = 30 * time.Second
)
