package coord

import (
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// Kind is a kind of coordination event; the caller maps each to its
// eventlog MESSAGE_ID.
type Kind string

// The events, each emitted once per episode.
const (
	LeaderGained     Kind = "leader-gained"
	LeaderLost       Kind = "leader-lost" // Reason says why
	PlanStale        Kind = "plan-stale"  // entering hold: Phase, Age
	PlanFallback     Kind = "plan-fallback"
	PlanFresh        Kind = "plan-fresh" // a stale episode ended
	StoreUnreachable Kind = "store-unreachable"
	StoreRecovered   Kind = "store-recovered"
	// MemberUnreadable: the store's entry for a member (Member) cannot
	// be read (Err says why): it is skipped; once per episode.
	MemberUnreadable Kind = "member-unreadable"
)

// Reason is why a leader lost its lease.
type Reason string

// The reasons.
const (
	// ReasonFenced: the store refused the plan or the renewal: another
	// host holds the lease.
	ReasonFenced Reason = "fenced"
	// ReasonExpired: a TTL passed on this host's clock since its last
	// good renewal (paused, or the store silent).
	ReasonExpired  Reason = "expired"
	ReasonResigned Reason = "resigned"
)

// Event is one coordination event for the journal.
type Event struct {
	Kind   Kind
	Pool   string
	Epoch  uint64 // the term's (leadership), the plan's (staleness)
	Reason Reason
	Phase  fleet.Phase
	Age    time.Duration // the plan's
	Member string        // the host id of an unreadable member's entry
	Err    error
	At     time.Time // host clock
}

// Events receives coordination events, in the owner's goroutine: it must
// not block.
type Events interface{ Event(Event) }

// EventsFunc adapts a function to Events.
type EventsFunc func(Event)

// Event implements Events.
func (f EventsFunc) Event(e Event) { f(e) }

// episodes are the open episodes, so that each event comes once.
type episodes struct {
	unreachable bool
	stale       bool
	fallback    bool
}

// episodes emits the store's and the plan's episode events for a tick.
func (c *Coordinator) episodes(now time.Time, a fleet.Apply) {
	st, ev := &c.st, c.deps.Events
	e := Event{Pool: c.cfg.Pool, At: now, Epoch: a.Epoch, Phase: a.Phase, Age: a.Age}
	switch reach := st.firstErr == nil; {
	case !reach && !st.ep.unreachable:
		st.ep.unreachable = true
		e.Kind, e.Err = StoreUnreachable, st.firstErr
		ev.Event(e)
	case reach && st.ep.unreachable:
		st.ep.unreachable = false
		e.Kind, e.Err = StoreRecovered, nil
		ev.Event(e)
	}
	e.Err = nil
	stale := a.Phase == fleet.PhaseHold || a.Phase == fleet.PhaseFallback
	if stale && !st.ep.stale {
		st.ep.stale = true
		e.Kind = PlanStale
		ev.Event(e)
	}
	if a.Phase == fleet.PhaseFallback && !st.ep.fallback {
		st.ep.fallback = true
		e.Kind = PlanFallback
		ev.Event(e)
	}
	if !stale && st.ep.stale && a.Phase != fleet.PhaseNone {
		st.ep.stale, st.ep.fallback = false, false
		e.Kind = PlanFresh
		ev.Event(e)
	}
}

// publish stores the tick's status and signals a change of target or
// leadership.
func (c *Coordinator) publish(now time.Time, a fleet.Apply) *Status {
	st := &c.st
	plan, _ := c.view.Plan()
	plan.State = nil
	s := &Status{
		Pool: c.cfg.Pool, ID: c.cfg.ID, At: now, Ticks: st.ticks,
		Target: a.Target, Apply: a, Leader: st.leading, Epoch: st.epoch, Lease: st.lease,
		Plan: plan, Ignored: st.ignored, Members: st.members, Result: st.result,
		Reachable: st.firstErr == nil, StoreErr: st.firstErr, SourceErr: st.sourceErr, StateErr: st.stateErr,
		Calls: st.calls, Total: st.total,
	}
	if !st.leading {
		s.Epoch = 0
	}
	old := c.pub.Swap(s)
	if old == nil || old.Target != s.Target || old.Leader != s.Leader || old.Epoch != s.Epoch {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	return s
}
