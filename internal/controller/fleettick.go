package controller

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
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	fleetmode "github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/fleet/coord"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// publishFleet hands the coordinator the pool's source read and this
// host's numbers. Owner only.
func (p *Pool) publishFleet() {
	if p.fl == nil {
		return
	}
	starting := 0
	if p.workers.svc != nil {
		_, starting = p.workers.readyCount()
	}
	p.fl.publish(p.readPlan(), p.workers.live(), starting, p.workers.draining())
}

// refleet follows a reload: a pool that joins, leaves, or changes its
// fleet's store, timings or fleet-wide min_workers gets a new coordinator
// (the old one resigns); otherwise the running one takes the new
// configuration and pipeline. Owner only.
func (p *Pool) refleet(cfg *config.Pool) error {
	old := p.fl
	if old != nil && cfg.Joins() && reflect.DeepEqual(old.cfg, *cfg.Fleet) && old.pool.Load().MinWorkers == cfg.MinWorkers {
		old.pool.Store(cfg)
		old.c.SetPipeline(fleetPipeline(cfg, p.sc.rules))
		return nil
	}
	var fl *fleetLink
	if cfg.Joins() {
		var err error
		if fl, err = newFleetLink(cfg, p.sc.rules, p.log, p.opts.OpenFleetStore); err != nil {
			return err
		}
	}
	if old != nil {
		old.stop(reloadWhy(old, cfg))
	}
	p.fl = fl
	p.flWake.Store(fl)
	if fl != nil {
		p.publishFleet()
		fl.start(p.kick)
	}
	return nil
}

// Resign hands a fleet pool's lease to another host at once (a restart,
// which keeps the workers); the pool coordinates no more. A pool that is
// not in a fleet does nothing.
func (p *Pool) Resign() {
	var fl *fleetLink
	p.do(func() {
		fl, p.fl = p.fl, nil
		p.flWake.Store(nil)
	})
	if fl != nil {
		fl.stop(stopRestart)
	}
}

// tickRead is what a fleet pool's tick knows of the queue: the leader's
// own last read, when this host leads and read it since the last tick;
// followers read nothing (the leader reads the queue once for the fleet).
func (fl *fleetLink) tickRead(since time.Time) (observed, bool) {
	r := fl.lastRead.Load()
	if r == nil || !fl.c.Snapshot().Leader || r.at.Before(since) {
		return observed{}, false
	}
	return r.obs, true
}

// fleetDecide is a fleet pool's decision: this host's share of the plan,
// as the coordinator applies it (fresh, joining, hold or fallback), within
// the host's capacity. Until the coordinator's first tick, it holds.
func (p *Pool) fleetDecide(now time.Time, read observed, leaderRead bool) tickDecision {
	live := p.workers.live()
	t := tickDecision{obs: policy.Observation{Current: live}}
	wall := p.wallNow()
	s := p.fl.c.Snapshot()
	d := policy.Decision{Now: now, Action: policy.Hold, Current: live, Desired: live}
	switch {
	case s.Ticks == 0:
		d.Rationale = "hold: fleet: the coordination has not ticked yet"
	default:
		d.Desired = min(max(s.Target, 0), p.cfg.MaxWorkers)
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
		t.counts, t.srcErr = p.observed(now, read)
	} else {
		t.unread = true
	}
	if s.Leader && t.srcErr == nil && leaderRead {
		// The leader explains the fleet's decision, then its own share.
		fp := p.fl.pool.Load()
		in := fleetInput(fp, read, fleetmode.Sum(s.Members))
		t.e = explain(wall, s.Result.Decision, in.Params, in.Obs, t.counts, nil)
		t.e.Current = live
	} else {
		t.e = &api.Explanation{Time: wall, Current: live}
	}
	t.e.Add(fleetStep(s))
	t.e.Add(api.Step{Name: "share", Value: strconv.Itoa(d.Desired), Held: d.Action == policy.Hold,
		Note: fmt.Sprintf("this host's, capacity %d", fleetCapacity(p.fl.pool.Load()))})
	t.d = d
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
		note += "; store: " + shortError(s.StoreErr)
	}
	return api.Step{Name: "fleet", Value: string(s.Apply.Phase), Held: s.Apply.Phase == fleetmode.PhaseHold, Note: note}
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

// fleetSummary is the pool's fleet in a few words, for STATUS=; "" for a
// pool not in a fleet.
func (p *Pool) fleetSummary() string {
	if p.fl == nil {
		return ""
	}
	s := p.fl.c.Snapshot()
	role := "fleet follower"
	if s.Leader {
		role = "fleet leader"
	}
	out := fmt.Sprintf("%s, share %d of %d", role, s.Target, s.Plan.Target)
	if s.Apply.Phase != fleetmode.PhaseFresh {
		out += ", plan " + string(s.Apply.Phase)
	}
	return out
}

// leaveFleet hands this host's share to the other hosts before a stop
// drains its workers, so that the fleet does not run short meanwhile: the
// heartbeat says capacity 0, the leader's next split moves the share away
// (capped at the others' capacity), and the drain waits until a fresh plan
// gives this host nothing and the others run what the plan gives them, or
// until leaveTimeout. Without a fresh plan (no leader, no store) nobody
// would take the share over: it does not wait.
func (p *Pool) leaveFleet(ctx context.Context, fl *fleetLink) {
	if fl == nil {
		return
	}
	fl.leaving.Store(true)
	fl.c.Wake()
	t0 := time.Now()
	limit := time.NewTimer(leaveTimeout(fl.cfg))
	defer limit.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		s := fl.c.Snapshot()
		if s.Apply.Phase != fleetmode.PhaseFresh && s.Apply.Phase != fleetmode.PhaseJoining {
			p.log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "fleet: no fresh plan (%s): draining without handing the share over", s.Apply.Phase)
			return
		}
		if share, ok := s.Plan.Shares[fl.cfg.HostID]; (!ok || share == 0) && fl.othersCover(ctx, s.Plan) {
			p.log.Event(eventlog.Lifecycle, eventlog.Notice, nil, "fleet: the other hosts took this host's share over in %s", time.Since(t0).Round(100*time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-limit.C:
			p.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "fleet: the other hosts did not take this host's share over within %s: draining anyway", leaveTimeout(fl.cfg))
			return
		case <-tick.C:
		}
	}
}

// leaveTimeout bounds leaveFleet: the leader's next ticks, then the other
// hosts' starts.
func leaveTimeout(f config.PoolFleet) time.Duration {
	return 3*max(f.Heartbeat, time.Second) + 30*time.Second
}

// othersCover says whether the other hosts run at least what the plan
// gives them (one store call; the leaving host's own count is left out).
func (fl *fleetLink) othersCover(ctx context.Context, plan fleetmode.Plan) bool {
	cctx, cancel := context.WithTimeout(ctx, max(fl.cfg.Heartbeat, time.Second))
	defer cancel()
	ms, now, err := fl.store.Members(cctx, fl.pool.Load().Name)
	if err != nil {
		return false
	}
	for _, m := range fleetmode.LiveMembers(ms, now, fleetmode.GoneAfter(fl.cfg.Heartbeat)) {
		if m.ID != fl.cfg.HostID && m.Live < plan.Shares[m.ID] {
			return false
		}
	}
	return true
}

// tickDecision is what a tick decided, and from what.
type tickDecision struct {
	d      policy.Decision
	e      *api.Explanation
	obs    policy.Observation
	counts source.Counts
	srcErr error
	// unread: the tick did not read the queue (a fleet's follower).
	unread bool
}
