package controller

// Service pools (issue 19): the pool's workers are replicas that serve
// traffic. Each gets its ports (ports.go) and is admitted by its
// readiness: systemd's own (active, or READY=1 with Type=notify) or a
// probe run by one probe.Prober per pool, whose transitions arrive on the
// pool's loop as messages. The ready replicas are published to discovery
// files (publish.go), and a ready replica that leaves first leaves those
// files, then waits its drain period, then is stopped (quiet.go's
// machinery). All of it is the workers', owned by the pool's loop.

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/discovery"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/probe"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// ReadinessProber is what a service pool needs of a probe.Prober; tests
// inject one that they drive.
type ReadinessProber interface {
	Add(probe.Target) error
	Remove(id string) bool
	Transitions() <-chan probe.Transition
	Close()
}

// readiness is a replica's, as the pool tracks it.
type readiness int

const (
	repStarting readiness = iota // not ready yet since it started
	repReady                     // serves: in discovery
	repUnready                   // was ready, is not: out of discovery
)

func (r readiness) String() string {
	switch r {
	case repReady:
		return "ready"
	case repUnready:
		return "not-ready"
	}
	return "starting"
}

// service is a service pool's side of the workers.
type service struct {
	prober  ReadinessProber // nil unless the readiness is a probe
	byProbe map[string]*worker
	client  *http.Client
	run     source.CommandRunner
	runAs   func(user, group string) source.CommandRunner // Options.ProbeCommands
	pubs    publishing                                    // publish.go
	// listed are the units the discovery file listed when the pool began:
	// adopted ones among them start ready, so that a restart of the
	// daemon takes none out of discovery.
	listed map[string]bool
	// relist carries the re-lists of notify.go; relistArmed says one is
	// due.
	relist      chan struct{}
	relistArmed bool
	guard       *portGuard // portguard.go; nil for a pool without ports
}

// newService prepares the service side of a pool whose cfg.Service is set.
func newService(cfg *config.Pool, clock Clock, opts Options) (*service, error) {
	s := &service{byProbe: map[string]*worker{}, run: opts.Commands, runAs: opts.ProbeCommands, relist: make(chan struct{}, 1)}
	if s.run == nil {
		s.run = source.ProcessGroupRunner{}
	}
	if isProbe(cfg.Service) {
		if opts.NewProber != nil {
			s.prober = opts.NewProber(probe.SystemClock(clock))
		} else {
			s.prober = probe.New(probe.SystemClock(clock), 256)
		}
		s.client = probe.NewHTTPClient()
	}
	pub, err := newPublisher(cfg)
	if err != nil {
		return nil, err
	}
	s.pubs = newPublishing(pub)
	s.listed = readDiscoveryUnits(cfg)
	s.guardPorts(cfg, clock, opts.PortOwners)
	return s, nil
}

func isProbe(svc *config.Service) bool {
	switch svc.Readiness.Kind {
	case config.ReadyHTTP, config.ReadyTCP, config.ReadyCommand:
		return true
	}
	return false
}

// readDiscoveryUnits reads the units that DIR/POOL.json lists, as the last
// daemon wrote it; none when it cannot be read (discovery.ListedUnits: a
// FIFO or a link there is no list).
func readDiscoveryUnits(cfg *config.Pool) map[string]bool {
	listed, _ := discovery.ListedUnits(cfg.Service.DiscoveryDir, cfg.Name)
	return listed
}

// close stops the prober; the pool's loop has ended.
func (s *service) close() {
	if s == nil {
		return
	}
	if s.prober != nil {
		s.prober.Close()
	}
	s.guard.stop()
}

// transitions is the prober's channel, nil without one.
func (s *service) transitions() <-chan probe.Transition {
	if s == nil || s.prober == nil {
		return nil
	}
	return s.prober.Transitions()
}

// probeID names one run of a replica: a restarted unit is a new target.
func probeID(w *worker) string { return w.unit + "/" + w.invocation }

// started takes in a replica just started by the pool.
func (ws *workers) replicaStarted(now time.Time, w *worker) {
	if ws.svc == nil {
		return
	}
	w.rd, w.readyFrom = repStarting, now
	if ws.cfg.Service.Readiness.Kind == config.ReadyActive || ws.cfg.Service.Readiness.Kind == "" {
		// Type=exec: the start job is done once the command runs.
		ws.setReadiness(w, repReady, nil, now)
	}
	ws.track(w, probe.Unknown)
}

// track makes the prober probe w, from initial.
func (ws *workers) track(w *worker, initial probe.State) {
	s := ws.svc
	if s.prober == nil {
		return
	}
	spec := ws.cfg.Service.Readiness.Probe.WithDefaults()
	if spec.Kind == "" {
		// The readiness kind names the probe; config may leave it there.
		spec.Kind = probe.Kind(ws.cfg.Service.Readiness.Kind)
	}
	env := make([]string, 0, len(w.ports))
	for k, v := range portEnv(ws.cfg.Service, w.ports) {
		env = append(env, k+"="+v)
	}
	run, err := s.probeRunner(ws.cfg)
	exec := func(ctx context.Context, argv []string) error {
		return run.RunCommand(ctx, argv, env, discard{}, discard{})
	}
	var check probe.Check
	if err == nil {
		check, err = spec.Check(serviceAddress(ws.cfg.Service), w.ports, s.client, exec)
	}
	if err != nil {
		ws.log.Event(eventlog.ReplicaReadiness, eventlog.Err, ws.workerFields(w.slot, w.unit, eventlog.Fields{"FLEXIQ_ERROR": err.Error()}),
			"cannot probe %s: %v", w.unit, err)
		return
	}
	ws.untrack(w)
	w.probeID = probeID(w)
	if err := s.prober.Add(probe.Target{ID: w.probeID, Check: check, Spec: spec, Initial: initial, StartPeriod: wakeStartPeriod(ws.cfg)}); err != nil {
		ws.log.Event(eventlog.ReplicaReadiness, eventlog.Err, ws.workerFields(w.slot, w.unit, eventlog.Fields{"FLEXIQ_ERROR": err.Error()}),
			"cannot probe %s: %v", w.unit, err)
		return
	}
	s.byProbe[w.probeID] = w
}

// probeRunner runs cfg's command probes: as the pool's probe user and
// group (config.Pool.ProbeAccount, the workers' unless readiness.user
// says otherwise), or as the daemon when that is none.
func (s *service) probeRunner(cfg *config.Pool) (source.CommandRunner, error) {
	user, group := cfg.ProbeAccount()
	switch {
	case user == "" && group == "":
		return s.run, nil
	case s.runAs == nil:
		return nil, fmt.Errorf("no runner can run the command probe as user %q", user)
	}
	return s.runAs(user, group), nil
}

// untrack stops probing w.
func (ws *workers) untrack(w *worker) {
	if ws.svc == nil || w.probeID == "" {
		return
	}
	if ws.svc.prober != nil {
		ws.svc.prober.Remove(w.probeID)
	}
	delete(ws.svc.byProbe, w.probeID)
	w.probeID = ""
}

func serviceAddress(svc *config.Service) string {
	if svc.Address == "" {
		return config.DefaultServiceAddress
	}
	return svc.Address
}

// replicasReconciled follows a reconcile: adopted replicas get their ports
// back and their readiness, restarted ones start over, gone ones are no
// longer probed; systemd's own readiness is read from the listing.
func (ws *workers) replicasReconciled(now time.Time, listed []units.Worker, r reconciled) {
	if ws.svc == nil {
		return
	}
	byUnit := indexByUnit(listed)
	for _, w := range r.adopted {
		lw, _ := byUnit.get(w.unit)
		w.ports = portsFromEnvironment(ws.cfg.Service, lw.Environment)
		w.rankPorts = listedRankPorts(ws.cfg.Service, lw.Ranks)
		// Its ready timeout counts from now: the daemon was not there to
		// see it start.
		w.readyFrom = now
		initial := probe.Unknown
		if ws.svc.listed[w.unit] || (!isProbe(ws.cfg.Service) && lw.ActiveState == "active") {
			// Ready as it was: no journal entry, no probe's "not ready"
			// for a replica that served all along.
			initial = probe.Ready
			w.rd, w.claim, w.everReady = repReady, repReady, true
		}
		ws.track(w, initial)
	}
	for _, rs := range r.restarted {
		rs.worker.rd, rs.worker.claim, rs.worker.readyFrom = repStarting, repStarting, now
		ws.track(rs.worker, probe.Unknown)
	}
	for _, c := range r.crashed {
		ws.untrack(c.worker)
	}
	for _, s := range r.stopping {
		ws.untrack(s.worker)
	}
	for _, w := range ws.fleet.liveWorkers() {
		if lw, ok := byUnit.get(w.unit); ok {
			w.cgroup = cmp.Or(lw.ControlGroup, w.cgroup)
			for i, r := range lw.Ranks {
				if i < len(w.rankCgroups) && r.ControlGroup != "" {
					w.rankCgroups[i] = r.ControlGroup
				}
			}
		}
	}
	// Only the first listing may vouch for what the last daemon published.
	ws.svc.listed = nil
	if isProbe(ws.cfg.Service) {
		return
	}
	for _, w := range ws.fleet.liveWorkers() {
		lw, ok := byUnit.get(w.unit)
		if !ok {
			continue
		}
		switch {
		case lw.ActiveState == "active" || lw.ActiveState == "reloading":
			ws.setReadiness(w, repReady, nil, now)
		case w.rd == repReady:
			ws.setReadiness(w, repUnready, nil, now)
			w.notReadySince = now
		default:
			w.claim = w.rd // not active: no longer says it is ready
		}
	}
}

// onTransition takes a prober's transition, on the pool's loop.
func (ws *workers) onTransition(t probe.Transition) {
	if ws.svc == nil {
		return
	}
	w, ok := ws.svc.byProbe[t.ID]
	if !ok || ws.fleet.live[w.slot] != w {
		return // a target since removed
	}
	switch t.To {
	case probe.Ready:
		ws.setReadiness(w, repReady, nil, t.At)
	case probe.NotReady:
		w.notReadySince = t.NotReadySince
		ws.setReadiness(w, repUnready, t.Err, t.At)
	default:
		w.rd, w.claim = repStarting, repStarting
	}
}

// setReadiness records what w's readiness (its probe, or systemd) says,
// at: a replica that says it is ready is ready only if the listeners on
// its ports are its own (portguard.go), read at or after at; else it
// stays out of discovery, or leaves it.
func (ws *workers) setReadiness(w *worker, rd readiness, why error, at time.Time) {
	w.claim = rd
	if rd == repReady && ws.svc.guard != nil {
		v := ws.checkPorts(w, at)
		ws.noteHeld(w, v)
		if v != nil {
			rd, why = w.rd, v
			if w.rd == repReady {
				rd, w.notReadySince = repUnready, at
			}
		}
	}
	ws.applyReadiness(w, rd, why)
}

// applyReadiness records w's readiness and says a change in the journal.
func (ws *workers) applyReadiness(w *worker, rd readiness, why error) {
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

// replaceUnready stops and replaces the replicas that never became ready
// within ready_timeout_sec, or stayed unready for unready_timeout_sec.
func (ws *workers) replaceUnready(ctx context.Context, now time.Time) {
	if ws.svc == nil || ws.stopping || ws.dryRun() {
		return
	}
	svc := ws.cfg.Service
	replaced := 0
	for _, w := range ws.fleet.liveWorkers() {
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
			ws.fleet.armBackoff(w.slot, now)
			replaced++
		}
	}
	if replaced > 0 {
		ws.startUpTo(ctx, now, ws.target, "replacing unready replica")
	}
}

// readyCount is the replicas that are ready, and those that are not.
func (ws *workers) readyCount() (ready, notReady int) {
	for _, w := range ws.fleet.live {
		if w.rd == repReady {
			ready++
		} else {
			notReady++
		}
	}
	return ready, notReady
}

// serviceVictims picks n replicas to retire on a scale-down: the ones not
// ready first, and no ready one that would take the ready count below
// min_workers. While a rollout runs, its new replicas that are not ready
// yet are kept: each is to replace an old one once it is ready, and taking
// it would only start another.
func (ws *workers) serviceVictims(n int) []*worker {
	rev := ws.revision()
	rolling := false
	for _, w := range ws.fleet.live {
		rolling = rolling || outdated(w, rev)
	}
	var notReady, ready []*worker
	for _, w := range ws.fleet.liveWorkers() {
		switch {
		case w.rd == repReady:
			ready = append(ready, w)
		case !rolling || outdated(w, rev):
			notReady = append(notReady, w)
		}
	}
	out := pickVictims(notReady, n, rev)
	spare := max(0, len(ready)-ws.cfg.MinWorkers)
	return append(out, pickVictims(ready, min(n-len(out), spare), rev)...)
}

// discard is an io.Writer that drops a probe command's output.
type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// reconfigure brings the service side to a reloaded configuration: a new
// Publisher when what it writes changed (it reads the files in place, so
// an unchanged set rewrites none), the service side made or dropped when
// the pool became or stopped being a service. A changed probe applies to
// the replicas started from then on.
func (ws *workers) reconfigure(clock Clock, opts Options, cfg *config.Pool) error {
	old := ws.cfg.Service
	switch {
	case cfg.Service == nil:
		ws.svc.close()
		ws.svc = nil
		return nil
	case ws.svc == nil || old == nil || isProbe(old) != isProbe(cfg.Service):
		svc, err := newService(cfg, clock, opts)
		if err != nil {
			return err
		}
		ws.svc.close()
		ws.svc = svc
		svc.listed = nil
		// The running replicas are taken as ready, unprobed: a change of
		// the readiness kind reaches them through the rollout.
		for _, w := range ws.fleet.liveWorkers() {
			w.probeID, w.rd, w.claim, w.everReady = "", repReady, repReady, true
		}
		return nil
	case old.DiscoveryDir != cfg.Service.DiscoveryDir || old.MetricsPort != cfg.Service.MetricsPort ||
		!sameTemplates(old.Templates, cfg.Service.Templates) || old.Wake.Listen != cfg.Service.Wake.Listen:
		pub, err := newPublisher(cfg)
		if err != nil {
			return err
		}
		ws.svc.pubs.pub, ws.svc.pubs.dirty = pub, true
	}
	ws.svc.guardPorts(cfg, clock, opts.PortOwners)
	return nil
}

// sameTemplates says whether a reload left the templates as they were:
// the same files, destinations, modes and commands, and the same text
// (the file may have been edited). Each load parses them afresh, so
// pointers always differ.
func sameTemplates(a, b []*discovery.Template) bool {
	return slices.EqualFunc(a, b, func(x, y *discovery.Template) bool {
		xs, ys := x.Spec, y.Spec
		sameAfter := (xs.After == nil) == (ys.After == nil) &&
			(xs.After == nil || xs.After.Path == ys.After.Path && xs.After.Timeout == ys.After.Timeout && slices.Equal(xs.After.Args, ys.After.Args))
		return xs.Source == ys.Source && xs.Destination == ys.Destination && xs.Mode == ys.Mode && sameAfter && x.Text() == y.Text()
	})
}
