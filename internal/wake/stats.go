package wake

import (
	"sync/atomic"
	"time"
)

// Stats are the counters a Holder keeps for the journal and the metrics.
type Stats struct {
	// WakeRequests counts the calls to Waker.Wake, WakeErrors those that
	// failed; Wakes counts the wake-ups that saw a ready replica.
	WakeRequests, WakeErrors, Wakes uint64
	// Accepted counts the connections accepted; Forwarded those handed to
	// a replica; Rejected those answered 503; Closed the non-HTTP ones
	// closed without a replica.
	Accepted, Forwarded, Rejected, Closed uint64
	// DialErrors counts the replicas that refused or did not answer a
	// dial; ReadyErrors the failed polls of Waker.Ready.
	DialErrors, ReadyErrors uint64
	// HeldNow is the number of connections waiting for a replica;
	// ForwardingNow those being proxied.
	HeldNow, ForwardingNow int64
	// LastTimeToReady is the last wake-up's time from its first wake
	// request to its first ready replica.
	LastTimeToReady time.Duration
}

// Cycle is one wake-up, reported to Config.OnWake when it ends: for the
// journal entry of issue 29 (how many connections were held, how long
// until the first ready replica).
type Cycle struct {
	Start time.Time
	// Ready is false when the wake-up ended without a ready replica (the
	// hold ran out and no connection was left waiting).
	Ready bool
	// TimeToReady is from the first wake request to the first poll that
	// saw a ready replica.
	TimeToReady time.Duration
	// Held is the number of connections waiting when the cycle ended;
	// Requests the wake requests it made.
	Held     int
	Requests uint64
}

type counters struct {
	wakeRequests, wakeErrors, wakes         atomic.Uint64
	accepted, forwarded, rejected, closed   atomic.Uint64
	dialErrors, readyErrors                 atomic.Uint64
	heldNow, forwardingNow, lastTimeToReady atomic.Int64
}

// Stats returns a snapshot of the counters.
func (h *Holder) Stats() Stats {
	c := &h.counters
	return Stats{
		WakeRequests: c.wakeRequests.Load(), WakeErrors: c.wakeErrors.Load(), Wakes: c.wakes.Load(),
		Accepted: c.accepted.Load(), Forwarded: c.forwarded.Load(), Rejected: c.rejected.Load(), Closed: c.closed.Load(),
		DialErrors: c.dialErrors.Load(), ReadyErrors: c.readyErrors.Load(),
		HeldNow: c.heldNow.Load(), ForwardingNow: c.forwardingNow.Load(),
		LastTimeToReady: time.Duration(c.lastTimeToReady.Load()),
	}
}
