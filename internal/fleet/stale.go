package fleet

import (
	"fmt"
	"time"
)

// A host's view of the plan (issue 20, "When the plan goes stale"): every
// host, the leader too, applies its own share of the last plan it read, and
// this file says what to apply when that plan ages. The plan's age is
// measured on the store's clock while the store answers (Plan.At against
// the now that Store.ReadPlan returns) and carried on from the last answer
// on the host's own clock (the controller's monotonic one) while it does
// not, so that neither a skewed host clock nor a silent store stops it
// from ageing.
//
// The phases, for a lease TTL and a hold time (default 2 TTLs):
//
//	fresh     age <= TTL            the plan's share for this host
//	joining   a fresh plan without  last: the leader has not counted this
//	          this host             host yet (its heartbeat is younger than
//	                                the plan); its workers are kept until
//	                                it has
//	hold      age <= TTL + hold     last: no leader for now, or no store;
//	                                a new leader is due within a TTL, so
//	                                nothing moves
//	fallback  age >  TTL + hold     max(last, local) while the store
//	                                answers, last while it does not
//	none      no plan seen yet      as fallback
//
// where last is the target the host applies now: its share of the last
// fresh plan (so holding last is holding the last share), or what it ran
// before (a restarted daemon keeps its workers and its target), and local
// is the host's share of the fleet's min_workers: ceil(min_workers /
// hosts), hosts being those of the last plan (or the caller's count of
// live members before any plan), capped at the host's capacity. So a
// failure of coordination never scales a host down (a stale plan's share
// is not applied; fallback only raises, to the fleet's baseline), and a
// host that cannot reach the store never starts workers beyond its last
// target: it cannot know that the others have not taken its share.
//
// Fencing on the reader's side: a plan with an epoch older than the
// highest seen (in a plan or a lease) is ignored, and so is a plan of the
// same epoch written before the one held (a lagging replica's answer).
//
// Anyone who can write the store can write there what no leader would
// (issue 27), and none of it may hold the fleet once it stops: an epoch
// above MaxEpoch is never the highest seen (the plan is ignored), a plan
// dated more than FutureSlack after the store's clock is ignored (it
// would otherwise hide every real plan of its epoch, as "written before
// the one held", for the whole term), a held plan that now lies in the
// store's future (the store's clock stepped back) no longer hides the
// plans written after it, and the highest epoch seen falls to a lower
// lease's once the store has shown lower leases for a whole TTL (a store
// that lost its data, met first by a host that knew nothing of the old
// epochs: without it, every host would ignore every plan for good).

// Phase is where a host's view of the plan stands.
type Phase string

// The phases, as status and explain show them.
const (
	PhaseNone     Phase = "none"
	PhaseFresh    Phase = "fresh"
	PhaseJoining  Phase = "joining"
	PhaseHold     Phase = "hold"
	PhaseFallback Phase = "fallback"
)

// DefaultTTL is the lease's TTL when the configuration gives none.
const DefaultTTL = 15 * time.Second

// RenewJitter spreads each renewal of the lease by ±RenewJitter × the
// renewal interval, so that the hosts' calls do not march in step.
const RenewJitter = 0.2

// LatestRenewal is how long after its last renewal a leader renews its
// lease at the latest: the renewal interval stretched by its jitter, and
// the coordination tick (the heartbeat) that notices it is due. A lease
// whose TTL is not longer lapses between renewals.
func LatestRenewal(renew, heartbeat time.Duration) time.Duration {
	return time.Duration(float64(renew)*(1+RenewJitter)) + heartbeat
}

// StaleParams are the knobs of the view.
type StaleParams struct {
	TTL  time.Duration // the lease's; DefaultTTL when <= 0
	Hold time.Duration // after the TTL; 2 TTLs when <= 0
	// MinWorkers is the fleet's min_workers, Capacity this host's.
	MinWorkers int
	Capacity   int
}

func (p StaleParams) ttl() time.Duration {
	if p.TTL <= 0 {
		return DefaultTTL
	}
	return p.TTL
}

func (p StaleParams) hold() time.Duration {
	if p.Hold <= 0 {
		return 2 * p.ttl()
	}
	return p.Hold
}

// View is one host's view of its pool's plan. The zero value has seen
// nothing. Not safe for concurrent use.
type View struct {
	ID      string // this host's id
	highest uint64
	// lowerSince is when (host clock) a lease below highest was first
	// seen, in a run of such leases; zero when the last lease was not.
	lowerSince time.Time
	plan       Plan
	have       bool
	age        time.Duration // the plan's age at the last read, store's clock
	readAt     time.Time     // that read, on the host's clock
}

// NoteEpoch records an epoch seen elsewhere: plans of older epochs are
// ignored from now on. An epoch above MaxEpoch is garbage: ignored.
func (v *View) NoteEpoch(epoch uint64) {
	if ValidEpoch(epoch) {
		v.highest = max(v.highest, epoch)
	}
}

// NoteLease records the lease's epoch as Store.Acquire returned it at
// hostNow (the host's clock): as NoteEpoch, and when the store has shown
// only leases below the highest epoch seen for a whole ttl, that lower
// epoch becomes the highest (the store lost its data; the plans of the new
// epochs are taken again). A garbage epoch, or none (0, a lease
// released), neither raises nor lowers it, nor ends a run of lower ones.
func (v *View) NoteLease(epoch uint64, hostNow time.Time, ttl time.Duration) {
	switch {
	case !ValidEpoch(epoch):
	case epoch >= v.highest:
		v.highest, v.lowerSince = epoch, time.Time{}
	case v.lowerSince.IsZero():
		v.lowerSince = hostNow
	case hostNow.Sub(v.lowerSince) >= ttl:
		v.highest, v.lowerSince = epoch, time.Time{}
	}
}

// Observe offers a plan read at storeNow (the store's clock), at hostNow
// (the host's). It says whether the plan was taken and, if not, why. A read
// of the plan already held refreshes its age.
func (v *View) Observe(p Plan, storeNow, hostNow time.Time) (bool, string) {
	ahead := storeNow.Add(FutureSlack)
	switch {
	case p.Epoch == 0:
		return false, "no plan yet"
	case !ValidEpoch(p.Epoch):
		return false, fmt.Sprintf("epoch %d beyond %d: garbage", p.Epoch, uint64(MaxEpoch))
	case p.At.After(ahead):
		return false, fmt.Sprintf("epoch %d plan dated %s, after the store's clock %s", p.Epoch, p.At.Format(time.RFC3339Nano), storeNow.Format(time.RFC3339Nano))
	case p.Epoch < v.highest:
		return false, fmt.Sprintf("epoch %d older than %d", p.Epoch, v.highest)
	case v.have && p.Epoch == v.plan.Epoch && p.At.Before(v.plan.At) && !v.plan.At.After(ahead):
		return false, fmt.Sprintf("epoch %d plan of %s older than the one held", p.Epoch, p.At.Format(time.RFC3339Nano))
	}
	v.highest, v.plan, v.have = max(v.highest, p.Epoch), p, true
	v.age, v.readAt = max(storeNow.Sub(p.At), 0), hostNow
	return true, ""
}

// Plan is the plan held and whether there is one.
func (v *View) Plan() (Plan, bool) { return v.plan, v.have }

// Highest is the highest epoch seen.
func (v *View) Highest() uint64 { return v.highest }

// Age is the held plan's age at hostNow (0 without one).
func (v *View) Age(hostNow time.Time) time.Duration {
	if !v.have {
		return 0
	}
	return v.age + max(hostNow.Sub(v.readAt), 0)
}

// Apply is what a host applies at a tick, and why.
type Apply struct {
	Target int
	Phase  Phase
	Age    time.Duration // the plan's; 0 without one
	Epoch  uint64        // the plan's; 0 without one
	Why    string
}

// Target is the target this host applies at hostNow. last is the target
// it applies now; reachable says whether the store answered this tick;
// hosts is the live members' count, used before any plan.
func (v *View) Target(hostNow time.Time, p StaleParams, last int, reachable bool, hosts int) Apply {
	last = max(last, 0)
	a := Apply{Age: v.Age(hostNow)}
	if v.have {
		a.Epoch = v.plan.Epoch
		hosts = len(v.plan.Shares)
	}
	share, in := v.plan.Shares[v.ID]
	switch {
	case !v.have:
		a.Phase = PhaseNone
	case a.Age <= p.ttl() && !in:
		a.Phase, a.Target, a.Why = PhaseJoining, last, "not in the plan yet: keeps what it runs"
		return a
	case a.Age <= p.ttl():
		a.Phase, a.Target, a.Why = PhaseFresh, max(share, 0), "the plan's share"
		if p.Capacity > 0 && a.Target > p.Capacity {
			// No leader gives a host more than its capacity: a plan
			// that does was not a leader's.
			a.Target, a.Why = p.Capacity, fmt.Sprintf("the plan's share %d, capped at this host's capacity", share)
		}
		return a
	case a.Age <= p.ttl()+p.hold():
		a.Phase, a.Target = PhaseHold, last
		a.Why = fmt.Sprintf("plan stale (%s > TTL %s): holding the last target", a.Age.Round(time.Millisecond), p.ttl())
		return a
	default:
		a.Phase = PhaseFallback
	}
	local := LocalMin(p.MinWorkers, hosts, p.Capacity)
	if !reachable {
		a.Target = last
		a.Why = "store unreachable: never beyond the last target, never below it"
		return a
	}
	a.Target = max(last, local)
	a.Why = fmt.Sprintf("no usable plan: the local share of min_workers %d over %d hosts is %d, never below the last target %d", p.MinWorkers, max(hosts, 1), local, last)
	return a
}

// LocalMin is a host's share of the fleet's min_workers when there is no
// plan: ceil(min / hosts) (hosts at least 1), capped at capacity when
// capacity > 0. Rounding up errs on the side of baseline capacity: a fleet
// without a leader runs at most hosts−1 workers above its minimum.
func LocalMin(minWorkers, hosts, capacity int) int {
	hosts = max(hosts, 1)
	n := (max(minWorkers, 0) + hosts - 1) / hosts
	if capacity > 0 {
		n = min(n, capacity)
	}
	return n
}
