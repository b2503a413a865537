package decide

// A fleet pool's side of the tick (fleetlink.go has the coordination): the
// decision is this host's share of the leader's plan, the status and
// explain show the fleet, and a stop hands the host's share to the others
// before its workers drain.

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/snapshot"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/fleet/coord"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// Fleet is the decision of a pool that joins a fleet: this host's share
// of the leader's plan. It keeps the pool's local pipeline (Local) for its
// rules, which the leader's pipeline runs, and for the memory that a
// reload out of the fleet goes on with.
type Fleet struct {
	*Local
	fl *fleetLink
}

// newFleet prepares the fleet decider of cfg's pool over l; its
// coordinator runs from Start.
func newFleet(l *Local, cfg *config.Pool) (*Fleet, error) {
	fl, err := newFleetLink(cfg, l.sc.rules, l.log, l.opts.OpenFleetStore)
	if err != nil {
		return nil, err
	}
	return &Fleet{Local: l, fl: fl}, nil
}

// sameFleet says that cfg keeps the fleet's store, timings and fleet-wide
// min_workers, so that the running coordinator can take it.
func (f *Fleet) sameFleet(cfg *config.Pool) bool {
	return reflect.DeepEqual(f.fl.cfg, *cfg.Fleet) && f.fl.pool.Load().MinWorkers == cfg.MinWorkers
}

// reconfigure hands the running coordinator cfg and its pipeline.
func (f *Fleet) reconfigure(cfg *config.Pool) {
	f.fl.pool.Store(cfg)
	f.fl.c.SetPipeline(fleetPipeline(cfg, f.sc.rules))
}

// Ticked hands the coordinator the pool's source read and this host's
// numbers.
func (f *Fleet) Ticked(src source.Source) {
	f.fl.publish(f.plan(src), f.pool.Live(), f.pool.Starting(), f.pool.Draining())
}

// Start runs the coordinator until Stop; its changes wake the pool.
func (f *Fleet) Start() { f.fl.start(f.pool.Kick) }

// Stop ends the coordinator and resigns its lease; why is for the journal.
func (f *Fleet) Stop(why string) { f.fl.stop(why) }

// Reader reads nothing: the fleet's leader reads the queue, once for the
// fleet, in its coordinator (fleetlink.go).
func (f *Fleet) Reader(source.Source) func(context.Context) Observed {
	return func(context.Context) Observed { return Observed{} }
}

// WakeLeader wakes the coordinator when this host leads, for the source's
// wake-ups; any goroutine.
func (f *Fleet) WakeLeader() {
	if f.fl.c.Snapshot().Leader {
		f.fl.c.Wake()
	}
}

// tickRead is what a fleet pool's tick knows of the queue: the leader's
// own last read, when this host leads and read it since the last tick;
// followers read nothing (the leader reads the queue once for the fleet).
func (fl *fleetLink) tickRead(since time.Time) (Observed, bool) {
	r := fl.lastRead.Load()
	if r == nil || !fl.c.Snapshot().Leader || r.at.Before(since) {
		return Observed{}, false
	}
	return r.obs, true
}

// Decide is a fleet pool's decision: this host's share of the plan, as
// the coordinator applies it (fresh, joining, hold or fallback), within
// the host's capacity. Until the coordinator's first tick, it holds. The
// leader's own last read stands for the tick's, when it read since the
// last tick.
func (f *Fleet) Decide(now, started time.Time, _ Observed) Tick {
	read, leaderRead := f.fl.tickRead(started.Add(-f.cfg.PollInterval))
	live := f.pool.Live()
	t := Tick{Obs: policy.Observation{Current: live}}
	wall := f.pool.Wall()
	s := f.fl.c.Snapshot()
	d := policy.Decision{Now: now, Action: policy.Hold, Current: live, Desired: live}
	switch {
	case s.Ticks == 0:
		d.Rationale = "hold: fleet: the coordination has not ticked yet"
	default:
		d.Desired = min(max(s.Target, 0), f.cfg.MaxWorkers)
		switch {
		case d.Desired > live:
			d.Action = policy.ScaleUp
		case d.Desired < live:
			d.Action = policy.ScaleDown
		default:
			d.Action = policy.Stable
		}
		d.Rationale = fmt.Sprintf("fleet: this host's share %d (%s) of the fleet's target %d, plan epoch %d", d.Desired, s.Apply.Phase, s.Plan.Target, s.Plan.Epoch)
	}
	if leaderRead {
		t.Counts, t.SrcErr = f.pool.Observed(now, read)
	} else {
		t.Unread = true
	}
	if s.Leader && t.SrcErr == nil && leaderRead {
		// The leader explains the fleet's decision, then its own share.
		fp := f.fl.pool.Load()
		in := fleetInput(fp, read, fleet.Sum(s.Members))
		t.E = Explain(wall, s.Result.Decision, in.Params, in.Obs, t.Counts, nil)
		t.E.Current = live
	} else {
		t.E = &api.Explanation{Time: wall, Current: live}
	}
	t.E.Add(fleetStep(s))
	t.E.Add(api.Step{Name: "share", Value: strconv.Itoa(d.Desired), Held: d.Action == policy.Hold,
		Note: fmt.Sprintf("this host's, capacity %d", fleetCapacity(f.fl.pool.Load()))})
	t.D = d
	return t
}

// fleetStep is explain's fleet step.
func fleetStep(s *coord.Status) api.Step {
	role := "follower"
	if s.Leader {
		role = fmt.Sprintf("leader at epoch %d", s.Epoch)
	}
	note := fmt.Sprintf("%s; lease %s epoch %d; plan epoch %d, target %d, shares %s, age %s",
		role, orNone(coord.HostOf(s.Lease.Holder)), s.Lease.Epoch, s.Plan.Epoch, s.Plan.Target, fmtShares(s.Plan.Shares), s.Apply.Age.Round(100*time.Millisecond))
	if s.StoreErr != nil {
		note += "; store: " + snapshot.ShortError(s.StoreErr)
	}
	return api.Step{Name: "fleet", Value: string(s.Apply.Phase), Held: s.Apply.Phase == fleet.PhaseHold, Note: note}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func fmtShares(m map[string]int) string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%s=%d", api.ShortHostID(id), m[id])
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// Summary is the pool's fleet in a few words, for STATUS=.
func (f *Fleet) Summary() string {
	s := f.fl.c.Snapshot()
	role := "fleet follower"
	if s.Leader {
		role = "fleet leader"
	}
	out := fmt.Sprintf("%s, share %d of %d", role, s.Target, s.Plan.Target)
	if s.Apply.Phase != fleet.PhaseFresh {
		out += ", plan " + string(s.Apply.Phase)
	}
	return out
}

// Leave hands this host's share to the other hosts before a stop
// drains its workers, so that the fleet does not run short meanwhile: the
// heartbeat says capacity 0, the leader's next split moves the share away
// (capped at the others' capacity), and the drain waits until a fresh plan
// gives this host nothing and the others run what the plan gives them, or
// until leaveTimeout. Without a fresh plan (no leader, no store) nobody
// would take the share over: it does not wait. Any goroutine: the drain
// calls it outside the pool's owner, as the coordinator runs on its own.
func (f *Fleet) Leave(ctx context.Context) {
	fl := f.fl
	fl.leaving.Store(true)
	fl.c.Wake()
	t0 := time.Now()
	limit := time.NewTimer(leaveTimeout(fl.cfg))
	defer limit.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		s := fl.c.Snapshot()
		if s.Apply.Phase != fleet.PhaseFresh && s.Apply.Phase != fleet.PhaseJoining {
			f.log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "fleet: no fresh plan (%s): draining without handing the share over", s.Apply.Phase)
			return
		}
		if share, ok := s.Plan.Shares[fl.cfg.HostID]; (!ok || share == 0) && fl.othersCover(ctx, s.Plan) {
			f.log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "fleet: the other hosts took this host's share over in %s", time.Since(t0).Round(100*time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-limit.C:
			f.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "fleet: the other hosts did not take this host's share over within %s: draining anyway", leaveTimeout(fl.cfg))
			return
		case <-tick.C:
		}
	}
}

// leaveTimeout bounds Leave: the leader's next ticks, then the other
// hosts' starts.
func leaveTimeout(f config.PoolFleet) time.Duration {
	return 3*max(f.Heartbeat, time.Second) + 30*time.Second
}

// othersCover says whether the other hosts run at least what the plan
// gives them (one store call; the leaving host's own count is left out).
func (fl *fleetLink) othersCover(ctx context.Context, plan fleet.Plan) bool {
	cctx, cancel := context.WithTimeout(ctx, max(fl.cfg.Heartbeat, time.Second))
	defer cancel()
	ms, now, err := fl.store.Members(cctx, fl.pool.Load().Name)
	if err != nil {
		return false
	}
	for _, m := range fleet.LiveMembers(ms, now, fleet.GoneAfter(fl.cfg.Heartbeat)) {
		if m.ID != fl.cfg.HostID && m.Live < plan.Shares[m.ID] {
			return false
		}
	}
	return true
}
