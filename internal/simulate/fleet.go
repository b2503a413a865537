package simulate

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// Fleet mode (issue 20): the trace is the fleet's one queue, read once per
// tick by a leader elected by a simulated lease; the leader decides with
// fleet.Decide and every host applies its share through fleet.View, the
// daemon's own planner code. The store is simulated: each trace row is a
// tick of every host (heartbeat, lease renewal, plan read), on the trace's
// clock, and workers follow their host's target at once. One host may be
// powered off at a given time (its workers and heartbeats stop, its lease
// expires after the TTL), or its daemon killed for a while (its workers
// keep running; the daemon comes back with no memory of its epoch, as
// after SIGKILL, and keeps them), so that the split and the failover can
// be studied offline.

// FleetOptions describe the simulated fleet.
type FleetOptions struct {
	Hosts []fleet.Host
	// Fail is the host powered off at FailAt (seconds of trace time), or
	// "leader" for whichever host leads then; "" for none.
	Fail   string
	FailAt float64
	// Down > 0 makes the failure a kill of the daemon for Down seconds
	// rather than a power-off.
	Down      float64
	Heartbeat time.Duration // 0: fleet.DefaultHeartbeat
	TTL       time.Duration // 0: fleet.DefaultTTL
}

// FailLeader names the leader of the moment in FleetOptions.Fail.
const FailLeader = "leader"

// ParseFleetHosts parses "ID=CAPACITY,..." (at least one host, distinct
// ids, capacities >= 0).
func ParseFleetHosts(s string) ([]fleet.Host, error) {
	var hs []fleet.Host
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		id, c, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(c)
		switch {
		case !ok || id == "" || err != nil || n < 0:
			return nil, fmt.Errorf("fleet host %q: want ID=CAPACITY, capacity a whole number >= 0", part)
		case id == FailLeader || seen[id]:
			return nil, fmt.Errorf("fleet host %q: the id is taken", id)
		}
		seen[id] = true
		hs = append(hs, fleet.Host{ID: id, Capacity: n})
	}
	return hs, nil
}

// ParseFleetFail parses "HOST@SECONDS" (a power-off) or
// "HOST@SECONDS+DOWN" (the daemon killed for DOWN seconds); HOST may be
// "leader".
func ParseFleetFail(s string) (id string, at, down float64, err error) {
	id, when, ok := strings.Cut(s, "@")
	when, d, kill := strings.Cut(when, "+")
	t, err1 := strconv.ParseFloat(when, 64)
	if kill {
		var err2 error
		down, err2 = strconv.ParseFloat(d, 64)
		err1 = errors.Join(err1, err2)
		ok = ok && down > 0
	}
	if !ok || id == "" || err1 != nil || !(t >= 0) || math.IsInf(t+down, 0) {
		return "", 0, 0, fmt.Errorf("fleet failure %q: want HOST@SECONDS or HOST@SECONDS+DOWN (HOST may be %q)", s, FailLeader)
	}
	return id, t, down, nil
}

type simHost struct {
	fleet.Host
	alive  bool    // the daemon runs
	back   float64 // when a killed daemon comes back; 0: never
	epoch  uint64  // the lease epoch the daemon holds, 0 for none
	seenAt time.Time
	target int
	live   int
	view   fleet.View
}

type simLease struct {
	holder  string
	epoch   uint64
	expires time.Time
}

// acquire is the store's Acquire: renew for the holder with its epoch,
// take a free or expired lease with a new epoch. It returns the epoch id
// holds after the call, 0 for none.
func (l *simLease) acquire(now time.Time, id string, epoch uint64, ttl time.Duration) uint64 {
	switch {
	case l.holder == id && l.epoch == epoch && now.Before(l.expires):
		l.expires = now.Add(ttl)
	case l.holder == "" || !now.Before(l.expires):
		l.holder, l.epoch, l.expires = id, l.epoch+1, now.Add(ttl)
	default:
		return 0
	}
	return l.epoch
}

// fleetSim is the whole simulated fleet.
type fleetSim struct {
	opt    FleetOptions
	params policy.Params
	pipe   *policy.Pipeline
	hosts  []*simHost
	lease  simLease
	plan   fleet.Plan
	failed bool
}

// RunFleet replays trace through a fleet of opt.Hosts and writes one line
// per row to out in format ("jsonl" or "table").
func RunFleet(pool *config.Pool, trace io.Reader, opt FleetOptions, format string, out io.Writer) error {
	if len(opt.Hosts) == 0 {
		return errors.New("a fleet needs at least one host")
	}
	if format != FormatJSONL && format != FormatTable {
		return fmt.Errorf("unknown output format %q (want %q or %q)", format, FormatJSONL, FormatTable)
	}
	ticks, _, err := readTrace(trace)
	if err != nil {
		return err
	}
	st, err := newStepper(pool, nil)
	if err != nil {
		return err
	}
	if opt.Heartbeat <= 0 {
		opt.Heartbeat = fleet.DefaultHeartbeat
	}
	if opt.TTL <= 0 {
		opt.TTL = fleet.DefaultTTL
	}
	fs := &fleetSim{opt: opt, params: pool.PolicyParams(), pipe: st.pipe}
	for _, h := range opt.Hosts {
		fs.hosts = append(fs.hosts, &simHost{Host: h, alive: true, view: fleet.View{ID: h.ID}})
	}
	w := newFleetSink(format, out, fs.hosts)
	for _, tk := range ticks {
		row, err := fs.tick(tk)
		if err != nil {
			return fmt.Errorf("t=%g: %w", tk.t, err)
		}
		if err := w.write(row); err != nil {
			return fmt.Errorf("write simulation output: %w", err)
		}
	}
	if err := w.flush(); err != nil {
		return fmt.Errorf("write simulation output: %w", err)
	}
	return nil
}

// tick is one row: the failure if due, then every live host's heartbeat
// and lease call, the leader's decision, and every host's plan read.
func (fs *fleetSim) tick(tk tick) (fleetRow, error) {
	now := epoch.Add(seconds(tk.t))
	row := fleetRow{T: tk.t, Pending: tk.pending}
	row.Event = fs.fail(tk.t)
	var members []fleet.Member
	for _, h := range fs.hosts {
		if h.alive {
			h.seenAt = now
			h.epoch = fs.lease.acquire(now, h.ID, h.epoch, fs.opt.TTL)
		}
		members = append(members, fleet.Member{ID: h.ID, Capacity: h.Capacity, Live: h.live, SeenAt: h.seenAt})
	}
	live := fleet.LiveMembers(members, now, fleet.GoneAfter(fs.opt.Heartbeat))
	if l := fs.leader(now); l != nil {
		o := policy.Observation{Current: fleet.Sum(live).Live} // fleet.Decide counts its own
		if tk.pending != nil {
			o.Valid, o.Pending, o.Running = true, *tk.pending, *tk.running
		}
		if tk.oldestAge != nil {
			o.OldestAge, o.OldestKnown = seconds(*tk.oldestAge), true
		}
		in := policy.NewInput(now, fs.params, o, tk.host.paused, 0, policy.HostState{}, tk.host.prom)
		d, err := fleet.Decide(fs.pipe, fleet.Tick{
			Now: now, Epoch: fs.lease.epoch, Params: fs.params, Obs: o,
			Signals: in.Signals, Prom: in.Prom, Members: live, Prev: fs.plan,
		})
		if err != nil {
			return row, err
		}
		fs.plan, row.Rationale = d.Plan, d.Result.Decision.Rationale
	}
	sp := fleet.StaleParams{TTL: fs.opt.TTL, MinWorkers: fs.params.MinWorkers}
	for _, h := range fs.hosts {
		hr := fleetHostRow{ID: h.ID, Alive: h.alive, Capacity: h.Capacity}
		if h.alive {
			h.view.NoteEpoch(fs.lease.epoch)
			h.view.Observe(fs.plan, now, now)
			sp.Capacity = h.Capacity
			a := h.view.Target(now, sp, h.target, true, len(live))
			h.target, h.live = a.Target, min(a.Target, h.Capacity)
			hr.Phase = a.Phase
		}
		hr.Share, hr.Live = fs.plan.Shares[h.ID], h.live
		row.Live += h.live
		row.Hosts = append(row.Hosts, hr)
	}
	if l := fs.leader(now); l != nil {
		row.Leader = l.ID
	}
	row.Epoch, row.Target = fs.lease.epoch, fs.plan.Target
	if fs.plan.Epoch > 0 {
		row.PlanAge = now.Sub(fs.plan.At).Seconds()
	}
	return row, nil
}

// fail applies the failure when due, and brings a killed daemon back: a
// new View and no epoch, its target and workers kept. It returns the
// event, if any.
func (fs *fleetSim) fail(t float64) string {
	var event string
	if id := fs.opt.Fail; id != "" && !fs.failed && t >= fs.opt.FailAt {
		if id == FailLeader {
			id = fs.lease.holder
		}
		for _, h := range fs.hosts {
			switch {
			case h.ID != id:
			case fs.opt.Down > 0:
				h.alive, h.back, h.epoch = false, fs.opt.FailAt+fs.opt.Down, 0
				event = "daemon killed on " + id
			default:
				h.alive, h.live, h.target, h.epoch = false, 0, 0, 0
				event = "power off " + id
			}
		}
		fs.failed = true
	}
	for _, h := range fs.hosts {
		if !h.alive && h.back > 0 && t >= h.back {
			h.alive, h.back, h.view = true, 0, fleet.View{ID: h.ID}
			event = strings.TrimPrefix(event+"; daemon back on "+h.ID, "; ")
		}
	}
	return event
}

// leader is the live host holding an unexpired lease, or nil.
func (fs *fleetSim) leader(now time.Time) *simHost {
	for _, h := range fs.hosts {
		if h.alive && h.ID == fs.lease.holder && h.epoch == fs.lease.epoch && now.Before(fs.lease.expires) {
			return h
		}
	}
	return nil
}
