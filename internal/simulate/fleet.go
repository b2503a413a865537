package simulate

import (
	"errors"
	"fmt"
	"io"
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
// expires after the TTL), so that the split and the failover can be
// studied offline.

// FleetOptions describe the simulated fleet.
type FleetOptions struct {
	Hosts []fleet.Host
	// Fail is the host powered off at FailAt (seconds of trace time), or
	// "leader" for whichever host leads then; "" for none.
	Fail      string
	FailAt    float64
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

// ParseFleetFail parses "HOST@SECONDS" (HOST may be "leader").
func ParseFleetFail(s string) (string, float64, error) {
	id, at, ok := strings.Cut(s, "@")
	t, err := strconv.ParseFloat(at, 64)
	if !ok || id == "" || err != nil || t < 0 {
		return "", 0, fmt.Errorf("fleet failure %q: want HOST@SECONDS (HOST may be %q)", s, FailLeader)
	}
	return id, t, nil
}

type simHost struct {
	fleet.Host
	alive  bool
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

// acquire is the store's Acquire: renew for the holder, take a free or
// expired lease with a new epoch.
func (l *simLease) acquire(now time.Time, id string, ttl time.Duration) {
	switch {
	case l.holder == id:
		l.expires = now.Add(ttl)
	case l.holder == "" || !now.Before(l.expires):
		l.holder, l.epoch, l.expires = id, l.epoch+1, now.Add(ttl)
	}
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
	fs := &fleetSim{opt: opt, params: pool.PolicyParams(), pipe: &st.pipe}
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
	if id := fs.opt.Fail; id != "" && !fs.failed && tk.t >= fs.opt.FailAt {
		if id == FailLeader {
			id = fs.lease.holder
		}
		for _, h := range fs.hosts {
			if h.ID == id {
				h.alive, h.live, h.target = false, 0, 0
				row.Event = "power off " + id
			}
		}
		fs.failed = true
	}
	var members []fleet.Member
	for _, h := range fs.hosts {
		if h.alive {
			h.seenAt = now
			fs.lease.acquire(now, h.ID, fs.opt.TTL)
		}
		members = append(members, fleet.Member{ID: h.ID, Capacity: h.Capacity, Live: h.live, SeenAt: h.seenAt})
	}
	live := fleet.LiveMembers(members, now, fleet.GoneAfter(fs.opt.Heartbeat))
	if l := fs.leader(now); l != nil {
		o := policy.Observation{}
		if tk.pending != nil {
			o.Valid, o.Pending, o.Running = true, *tk.pending, *tk.running
		}
		if tk.oldestAge != nil {
			o.OldestAge, o.OldestKnown = seconds(*tk.oldestAge), true
		}
		d, err := fleet.Decide(fs.pipe, fleet.Tick{
			Now: now, Epoch: fs.lease.epoch, Params: fs.params, Obs: o,
			Signals: policy.Signals{Paused: tk.host.paused, Workers: fleet.Sum(live).Live, OldestAge: o.OldestAge.Seconds(), OldestKnown: o.OldestKnown},
			Prom:    tk.host.prom, Members: live, Prev: fs.plan,
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

// leader is the live host holding an unexpired lease, or nil.
func (fs *fleetSim) leader(now time.Time) *simHost {
	for _, h := range fs.hosts {
		if h.alive && h.ID == fs.lease.holder && now.Before(fs.lease.expires) {
			return h
		}
	}
	return nil
}
