package probe

import "time"

// State is a replica's readiness.
type State int

const (
	// Unknown: started (or added) and not yet ready once. Not ready.
	Unknown State = iota
	// Ready: serves; in discovery.
	Ready
	// NotReady: was ready, then failed failure_threshold times in a row.
	NotReady
)

func (s State) String() string {
	switch s {
	case Unknown:
		return "unknown"
	case Ready:
		return "ready"
	case NotReady:
		return "not-ready"
	}
	return "invalid"
}

// Tracker is one replica's readiness with Kubernetes' semantics: a result
// changes the state only once it has been seen threshold times in a row
// (success_threshold for passes, failure_threshold for failures), and any
// other result restarts the count. Unknown is not ready: as a pod's
// readiness starts as failure, a replica needs success_threshold passes
// before it serves, and failures before that leave it Unknown (the caller
// tells a replica that never became ready from one that stopped being
// ready by that).
type Tracker struct {
	success, failure int
	state            State
	passes, fails    int       // the current run of equal results
	notReadySince    time.Time // zero while Ready
	failRunStart     time.Time // the first failure of the current run
}

// NewTracker starts a tracker at start in state initial: Unknown for a
// replica just started, Ready for one adopted after a daemon restart that
// discovery already listed (so that a restart does not take it out of
// discovery until it fails failure times). Thresholds below 1 count as 1.
func NewTracker(success, failure int, initial State, start time.Time) *Tracker {
	t := &Tracker{success: max(success, 1), failure: max(failure, 1), state: initial}
	if initial != Ready {
		t.notReadySince = start
	}
	return t
}

// State is the current state.
func (t *Tracker) State() State { return t.state }

// NotReadySince is when the replica last stopped being ready: its start for
// Unknown, the first of the failures that made it NotReady, zero if Ready.
// The first failure rather than the transition, because the replica had
// stopped answering from then on.
func (t *Tracker) NotReadySince() time.Time { return t.notReadySince }

// Observe records one attempt's result at now and reports the state before
// it and whether the state changed.
func (t *Tracker) Observe(pass bool, now time.Time) (from State, changed bool) {
	from = t.state
	if pass {
		t.fails = 0
		t.passes++
		if t.state != Ready && t.passes >= t.success {
			t.state, t.notReadySince = Ready, time.Time{}
		}
	} else {
		if t.fails == 0 {
			t.failRunStart = now
		}
		t.passes = 0
		t.fails++
		if t.state == Ready && t.fails >= t.failure {
			t.state, t.notReadySince = NotReady, t.failRunStart
		}
	}
	return from, t.state != from
}
