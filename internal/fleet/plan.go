// The planner of fleet mode (issue 20): pure functions and one small
// state machine, no I/O, no clock (every time comes in as an argument,
// the store's clock wherever hosts must agree). The lease loop
// (internal/fleet/coord, which the controller runs) calls them each tick:
//
//	every host   Heartbeat(Member) -> Store
//	             Acquire (renew or take the lease): View.NoteEpoch(lease.Epoch)
//	the leader   Members -> LiveMembers(members, now, GoneAfter(heartbeat))
//	             reads the source once -> policy.Observation
//	             Prev: the plan it last wrote under its epoch, or at its
//	             acquisition the one ReadPlan returns (the old leader's)
//	             Decide(pipeline, Tick{...}) -> Plan
//	             WritePlan(plan) fenced by the epoch (ErrFenced: it lost;
//	             it steps down); written, View.Observe(plan, plan.At, hostNow)
//	every host   ReadPlan -> View.Observe(plan, storeNow, hostNow)
//	             View.Target(hostNow, ...) -> the target its controller
//	             applies with today's machinery (rate-limited starts,
//	             drained stops, the host guard on its own share)
//
// The leader writes its plan every tick, changed or not: Plan.At is the
// followers' only sign that a leader is alive, and a plan older than the
// TTL reads as stale (stale.go). So the leader's tick (the pool's poll
// interval) must be well inside the TTL; at the defaults (5 s, 15 s) two
// missed writes are tolerated.
//
// The files:
//   - member.go: membership; a host silent for GoneBeats heartbeats is
//     gone, measured on the store's clock; the live hosts in order of id.
//   - split.go: the sticky largest-remainder split of the fleet's target
//     (the exact algorithm is documented there).
//   - stale.go: a host's view of the plan (fresh, hold, fallback) and the
//     fencing on the reader's side by the highest epoch seen.
//   - plan.go: the leader's decision, policy.Pipeline on the fleet's
//     totals, then the split.
//   - state.go: the pipeline's memory in Plan.State (versioned JSON), so
//     that a new leader continues the old one's windows.
//
// The loop is internal/fleet/coord; the stores are redisstore and pgstore;
// internal/controller runs a coordinator per pool that joins a fleet.

package fleet

import (
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// The leader's decision (issue 20, "The leader decides once, for the
// fleet"): the same pipeline as a single host's, run once per tick on the
// fleet's totals, then the sticky split of its target over the live hosts.
// Pure: the caller reads the source once, the members and the last plan
// from the store, and writes the plan back fenced by its epoch.

// Tick is one leader tick's data.
type Tick struct {
	// Now is the store's clock (as Store.Members or Store.ReadPlan
	// returned it): the windows are kept on it, so that the next leader,
	// whatever its own clock, continues them.
	Now   time.Time
	Epoch uint64 // the leader's lease epoch
	// Params are the pool's, with the fleet-wide min_workers and
	// max_workers.
	Params policy.Params
	// Obs is the source's observation, read once by the leader for the
	// whole fleet. Its Current is ignored: the members' live total
	// replaces it.
	Obs policy.Observation
	// Signals and Prom are the rules' inputs, as the controller builds
	// them, with the fleet's live total as Signals.Workers.
	Signals policy.Signals
	Prom    map[string]policy.PromResult
	// Members are the live members (LiveMembers).
	Members []Member
	// Prev is the pool's last plan (Epoch 0: none): its State is the
	// windows' history, its Shares the split to stick to.
	Prev Plan
}

// Decision is a leader tick's outcome.
type Decision struct {
	Plan   Plan          // to write, fenced by Plan.Epoch
	Result policy.Result // the pipeline's, for explain and the journal
	Totals Totals
	// StateErr says why the previous plan's windows could not be
	// continued (they start afresh); nil when they were.
	StateErr error
}

// Decide is the leader's decision for one tick. pl is the pool's pipeline
// as the controller builds it (strategy, compiled rules, behaviour); its
// memory is scratch, replaced by t.Prev.State before the decision and saved
// into the new plan after it: the store holds the windows, so a decision
// whose plan did not land (fenced, or the write failed) is simply made
// again from the last plan that did. No host guard: it judges one host, and
// applies on each host to its own share.
//
// It refuses (ErrFenced) a previous plan of a newer epoch than the
// leader's: another host leads.
func Decide(pl *policy.Pipeline, t Tick) (Decision, error) {
	if t.Prev.Epoch > t.Epoch {
		return Decision{}, fmt.Errorf("fleet: the last plan has epoch %d, this leader %d: %w", t.Prev.Epoch, t.Epoch, ErrFenced)
	}
	if pl.Rec == nil || pl.Limiter == nil {
		return Decision{}, fmt.Errorf("fleet: the pipeline has no recommender or limiter")
	}
	var d Decision
	d.StateErr = RestoreState(pl, t.Now, t.Prev.State)
	d.Totals = Sum(t.Members)
	obs := t.Obs
	obs.Current = d.Totals.Live
	d.Result = pl.Decide(policy.Input{Now: t.Now, Params: t.Params, Obs: obs, Signals: t.Signals, Prom: t.Prom})
	pl.Acted(t.Now, d.Result.Decision)
	state, err := EncodeState(pl)
	if err != nil {
		return Decision{}, err
	}
	target := d.Result.Decision.Desired
	d.Plan = Plan{
		Epoch:  t.Epoch,
		Target: target,
		Shares: Split(target, Hosts(t.Members), t.Prev.Shares),
		At:     t.Now,
		State:  state,
	}
	return d, nil
}
