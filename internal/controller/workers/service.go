package workers

// Service pools (issue 19): the pool's workers are replicas that serve
// traffic. Each gets its ports (ports.go) and is admitted by its
// readiness: systemd's own (active, or READY=1 with Type=notify) or a
// probe run by one probe.Prober per pool, whose transitions arrive on the
// pool's loop as messages. The ready replicas are published to discovery
// files (publish.go), and a ready replica that leaves first leaves those
// files, then waits its drain period, then is stopped (quiet.go's
// machinery). All of it is the workers' service side (service, whose
// methods do nothing for a queue pool), owned by the pool's loop.

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/replicas"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/portowner"
	"github.com/flexiq/flexiq-scaled/internal/probe"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// ServiceOptions are the pool's Options a service pool's side needs: how
// it runs commands and probes, and where it reads the host's sockets
// (controller.Options says what each is).
type ServiceOptions struct {
	Commands      source.CommandRunner
	ProbeCommands func(user, group string) source.CommandRunner
	NewProber     func(probe.Clock) ReadinessProber
	PortOwners    func() (*portowner.Table, error)
}

// ReadinessProber is what a service pool needs of a probe.Prober; tests
// inject one that they drive.
type ReadinessProber = replicas.Prober

// readiness is a replica's (replicas.Readiness), under the names the
// workers use.
type readiness = replicas.Readiness

const (
	repStarting = replicas.Starting
	repReady    = replicas.Ready
	repUnready  = replicas.Unready
)

// service is a service pool's side of the workers: what a replica needs
// beyond a queue worker (probes, the port guard, discovery, the drain
// after leaving it). A queue pool has none (workers.Svc is nil), and the
// methods that the loop and the workers call on it do nothing on nil.
type service struct {
	ws     *Workers // the workers it is the side of
	probes *replicas.Probes[*Worker]
	run    source.CommandRunner
	Pubs   *replicas.Publishing // publish.go
	// listed are the units the discovery file listed when the pool began:
	// adopted ones among them start ready, so that a restart of the
	// daemon takes none out of discovery.
	listed map[string]bool
	// relist carries the re-lists of notify.go; relistArmed says one is
	// due.
	relist      chan struct{}
	relistArmed bool
	Guard       *replicas.Guard // portguard.go; nil for a pool without ports
}

// NewService prepares the service side of a pool whose cfg.Service is set.
func NewService(cfg *config.Pool, clock Clock, opts ServiceOptions, ws *Workers) (*service, error) {
	s := &service{ws: ws, run: opts.Commands, relist: make(chan struct{}, 1)}
	if s.run == nil {
		s.run = source.ProcessGroupRunner{}
	}
	s.probes = replicas.NewProbes[*Worker](cfg.Service, func() replicas.Prober {
		if opts.NewProber != nil {
			return opts.NewProber(probe.SystemClock(clock))
		}
		return probe.New(probe.SystemClock(clock), 256)
	}, s.run, opts.ProbeCommands)
	pub, err := replicas.NewPublisher(cfg)
	if err != nil {
		return nil, err
	}
	s.Pubs = replicas.NewPublishing(cfg.Name, pub, s.run, ws.log)
	s.listed = replicas.ListedUnits(cfg)
	s.guardPorts(cfg, clock, opts.PortOwners, ws.log, ws.workerFields)
	return s, nil
}

// Close stops the prober; the pool's loop has ended.
func (s *service) Close() {
	if s == nil {
		return
	}
	s.probes.Close()
	s.Guard.Stop()
}

// Transitions is the prober's channel, nil without one.
func (s *service) Transitions() <-chan probe.Transition {
	if s == nil {
		return nil
	}
	return s.probes.C()
}

// probeID names one run of a replica: a restarted unit is a new target.
func probeID(w *Worker) string { return w.unit + "/" + w.invocation }

// started takes in a replica just started by the pool.
func (s *service) replicaStarted(now time.Time, w *Worker) {
	if s == nil {
		return
	}
	ws := s.ws
	w.rd, w.readyFrom = repStarting, now
	if ws.Cfg.Service.Readiness.Kind == config.ReadyActive || ws.Cfg.Service.Readiness.Kind == "" {
		// Type=exec: the start job is done once the command runs.
		s.setReadiness(w, repReady, nil, now)
	}
	s.track(w, probe.Unknown)
}

// track makes the prober probe w, from initial.
func (s *service) track(w *Worker, initial probe.State) {
	ws := s.ws
	ps := s.probes
	if !ps.On() {
		return
	}
	check, spec, err := ps.Target(ws.Cfg, w.ports)
	if err == nil {
		s.untrack(w)
		w.probeID = probeID(w)
		err = ps.Add(w, w.probeID, check, spec, initial, replicas.StartPeriod(ws.Cfg))
	}
	if err != nil {
		ws.log.Event(eventlog.ReplicaReadiness, eventlog.Err, ws.workerFields(w.slot, w.unit, eventlog.Fields{"FLEXIQ_ERROR": err.Error()}),
			"cannot probe %s: %v", w.unit, err)
	}
}

// untrack stops probing w.
func (s *service) untrack(w *Worker) {
	if s == nil || w.probeID == "" {
		return
	}
	s.probes.Remove(w.probeID)
	w.probeID = ""
}

// replicasReconciled follows a reconcile: adopted replicas get their ports
// back and their readiness, restarted ones start over, gone ones are no
// longer probed; systemd's own readiness is read from the listing.
func (s *service) replicasReconciled(now time.Time, listed []units.Worker, r reconciled) {
	if s == nil {
		return
	}
	ws := s.ws
	byUnit := indexByUnit(listed)
	for _, w := range r.Adopted {
		lw, _ := byUnit.Get(w.unit)
		w.ports = replicas.PortsFromEnvironment(ws.Cfg.Service, lw.Environment)
		w.rankPorts = listedRankPorts(ws.Cfg.Service, lw.Ranks)
		// Its ready timeout counts from now: the daemon was not there to
		// see it start.
		w.readyFrom = now
		initial := probe.Unknown
		if s.listed[w.unit] || (!replicas.IsProbe(ws.Cfg.Service) && lw.ActiveState == "active") {
			// Ready as it was: no journal entry, no probe's "not ready"
			// for a replica that served all along.
			initial = probe.Ready
			w.rd, w.claim, w.everReady = repReady, repReady, true
		}
		s.track(w, initial)
	}
	for _, rs := range r.Restarted {
		rs.Worker.rd, rs.Worker.claim, rs.Worker.readyFrom = repStarting, repStarting, now
		s.track(rs.Worker, probe.Unknown)
	}
	for _, c := range r.Crashed {
		s.untrack(c.Worker)
	}
	for _, st := range r.Stopping {
		s.untrack(st.Worker)
	}
	for _, w := range ws.Slots.LiveWorkers() {
		if lw, ok := byUnit.Get(w.unit); ok {
			w.cgroup = cmp.Or(lw.ControlGroup, w.cgroup)
			for i, r := range lw.Ranks {
				if i < len(w.rankCgroups) && r.ControlGroup != "" {
					w.rankCgroups[i] = r.ControlGroup
				}
			}
		}
	}
	// Only the first listing may vouch for what the last daemon published.
	s.listed = nil
	if replicas.IsProbe(ws.Cfg.Service) {
		return
	}
	for _, w := range ws.Slots.LiveWorkers() {
		lw, ok := byUnit.Get(w.unit)
		if !ok {
			continue
		}
		switch {
		case lw.ActiveState == "active" || lw.ActiveState == "reloading":
			s.setReadiness(w, repReady, nil, now)
		case w.rd == repReady:
			s.setReadiness(w, repUnready, nil, now)
			w.notReadySince = now
		default:
			w.claim = w.rd // not active: no longer says it is ready
		}
	}
}

// OnTransition takes a prober's transition, on the pool's loop.
func (s *service) OnTransition(t probe.Transition) {
	if s == nil {
		return
	}
	ws := s.ws
	w, ok := s.probes.Get(t.ID)
	if !ok || ws.Slots.Live[w.slot] != w {
		return // a target since removed
	}
	switch t.To {
	case probe.Ready:
		s.setReadiness(w, repReady, nil, t.At)
	case probe.NotReady:
		w.notReadySince = t.NotReadySince
		s.setReadiness(w, repUnready, t.Err, t.At)
	default:
		w.rd, w.claim = repStarting, repStarting
	}
}

// setReadiness records what w's readiness (its probe, or systemd) says,
// at: a replica that says it is ready is ready only if the listeners on
// its ports are its own (portguard.go), read at or after at; else it
// stays out of discovery, or leaves it.
func (s *service) setReadiness(w *Worker, rd readiness, why error, at time.Time) {
	w.claim = rd
	if rd == repReady && s.Guard != nil {
		v := s.checkPorts(w, at)
		s.noteHeld(w, v)
		if v != nil {
			rd, why = w.rd, v
			if w.rd == repReady {
				rd, w.notReadySince = repUnready, at
			}
		}
	}
	s.applyReadiness(w, rd, why)
}

// applyReadiness records w's readiness and says a change in the journal.
func (s *service) applyReadiness(w *Worker, rd readiness, why error) {
	ws := s.ws
	if w.rd == rd {
		return
	}
	w.rd = rd
	w.everReady = w.everReady || rd == repReady
	f := ws.workerFields(w.slot, w.unit, eventlog.Fields{"FLEXIQ_READINESS": rd.String()})
	if rd == repReady {
		ws.log.Event(eventlog.ReplicaReadiness, eventlog.Info, f, "%s is ready: it enters discovery", w.unit)
		return
	}
	detail := ""
	if why != nil {
		f["FLEXIQ_ERROR"] = why.Error()
		detail = ": " + why.Error()
	}
	ws.log.Event(eventlog.ReplicaReadiness, eventlog.Notice, f, "%s is not ready (%s): it leaves discovery until it is again%s", w.unit, rd, detail)
}

// ReplaceUnready stops and replaces the replicas that never became ready
// within ready_timeout_sec, or stayed unready for unready_timeout_sec.
func (s *service) ReplaceUnready(ctx context.Context, now time.Time) {
	if s == nil || s.ws.Stopping || dryRun(s.ws.Cfg) {
		return
	}
	ws := s.ws
	svc := ws.Cfg.Service
	replaced := 0
	for _, w := range ws.Slots.LiveWorkers() {
		var reason, text string
		switch {
		case w.rd == repStarting && svc.ReadyTimeout > 0 && now.Sub(w.readyFrom) >= svc.ReadyTimeout:
			reason, text = "never-ready", fmt.Sprintf("not ready within ready_timeout_sec (%s) of its start", svc.ReadyTimeout)
		case w.rd == repUnready && svc.UnreadyTimeout > 0 && now.Sub(w.notReadySince) >= svc.UnreadyTimeout:
			reason, text = "unready", fmt.Sprintf("not ready for unready_timeout_sec (%s)", svc.UnreadyTimeout)
		default:
			continue
		}
		ws.log.Event(eventlog.ReplicaReplaced, eventlog.Warning, ws.workerFields(w.slot, w.unit, eventlog.Fields{"FLEXIQ_REASON": reason}),
			"replica %s was %s: stopping and replacing it", w.unit, text)
		if ws.retire(ctx, now, w, "replacing a replica "+reason) {
			// Its slot waits as after a crash: a replica that cannot get
			// ready must not be restarted in a tight loop.
			ws.Slots.ArmBackoff(w.slot, now)
			replaced++
		}
	}
	if replaced > 0 {
		ws.StartUpTo(ctx, now, ws.Target, "replacing unready replica")
	}
}

// ReadyCount is the replicas that are ready, and those that are not.
func (s *service) ReadyCount() (ready, notReady int) {
	ws := s.ws
	for _, w := range ws.Slots.Live {
		if w.rd == repReady {
			ready++
		} else {
			notReady++
		}
	}
	return ready, notReady
}

// ServiceVictims picks n replicas to retire on a scale-down: the ones not
// ready first, and no ready one that would take the ready count below
// min_workers. While a rollout runs, its new replicas that are not ready
// yet are kept: each is to replace an old one once it is ready, and taking
// it would only start another.
func (s *service) ServiceVictims(n int) []*Worker {
	ws := s.ws
	rev := ws.Revision()
	rolling := false
	for _, w := range ws.Slots.Live {
		rolling = rolling || outdated(w, rev)
	}
	var notReady, ready []*Worker
	for _, w := range ws.Slots.LiveWorkers() {
		switch {
		case w.rd == repReady:
			ready = append(ready, w)
		case !rolling || outdated(w, rev):
			notReady = append(notReady, w)
		}
	}
	out := PickVictims(notReady, n, rev)
	spare := max(0, len(ready)-ws.Cfg.MinWorkers)
	return append(out, PickVictims(ready, min(n-len(out), spare), rev)...)
}

// Reconfigure brings the service side to a reloaded configuration: a new
// Publisher when what it writes changed (it reads the files in place, so
// an unchanged set rewrites none), the service side made or dropped when
// the pool became or stopped being a service. A changed probe applies to
// the replicas started from then on.
func (ws *Workers) Reconfigure(clock Clock, opts ServiceOptions, cfg *config.Pool) error {
	old := ws.Cfg.Service
	switch {
	case cfg.Service == nil:
		ws.Svc.Close()
		ws.Svc = nil
		return nil
	case ws.Svc == nil || old == nil || replicas.IsProbe(old) != replicas.IsProbe(cfg.Service):
		svc, err := NewService(cfg, clock, opts, ws)
		if err != nil {
			return err
		}
		ws.Svc.Close()
		ws.Svc = svc
		svc.listed = nil
		// The running replicas are taken as ready, unprobed: a change of
		// the readiness kind reaches them through the rollout.
		for _, w := range ws.Slots.LiveWorkers() {
			w.probeID, w.rd, w.claim, w.everReady = "", repReady, repReady, true
		}
		return nil
	case old.DiscoveryDir != cfg.Service.DiscoveryDir || old.MetricsPort != cfg.Service.MetricsPort ||
		!replicas.SameTemplates(old.Templates, cfg.Service.Templates) || old.Wake.Listen != cfg.Service.Wake.Listen:
		pub, err := replicas.NewPublisher(cfg)
		if err != nil {
			return err
		}
		ws.Svc.Pubs.Replace(pub)
	}
	ws.Svc.guardPorts(cfg, clock, opts.PortOwners, ws.log, ws.workerFields)
	return nil
}
