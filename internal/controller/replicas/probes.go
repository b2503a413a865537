package replicas

// A service pool's readiness probes: one probe.Prober per pool, whose
// transitions arrive on the pool's loop as messages.

import (
	"time"

	"context"
	"fmt"
	"net/http"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/probe"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// Prober is what a service pool needs of a probe.Prober; tests inject one
// that they drive.
type Prober interface {
	Add(probe.Target) error
	Remove(id string) bool
	Transitions() <-chan probe.Transition
	Close()
}

// Probes are a pool's probe targets, each a replica W of the pool's.
type Probes[W any] struct {
	prober Prober // nil unless the readiness is a probe
	byID   map[string]W
	client *http.Client
	run    source.CommandRunner
	runAs  func(user, group string) source.CommandRunner // runs a command as a user
}

// NewProbes are the probes of svc: none unless its readiness is a probe
// (newProber makes the Prober then). run runs the command probes as the
// daemon, runAs as another user.
func NewProbes[W any](svc *config.Service, newProber func() Prober, run source.CommandRunner, runAs func(user, group string) source.CommandRunner) *Probes[W] {
	p := &Probes[W]{byID: map[string]W{}, run: run, runAs: runAs}
	if IsProbe(svc) {
		p.prober = newProber()
		p.client = probe.NewHTTPClient()
	}
	return p
}

// On says whether the pool probes its replicas.
func (p *Probes[W]) On() bool { return p.prober != nil }

// Target is the check and spec of a probe of a replica of cfg on ports.
func (p *Probes[W]) Target(cfg *config.Pool, ports map[string]int) (probe.Check, probe.Spec, error) {
	spec := cfg.Service.Readiness.Probe.WithDefaults()
	if spec.Kind == "" {
		// The readiness kind names the probe; config may leave it there.
		spec.Kind = probe.Kind(cfg.Service.Readiness.Kind)
	}
	env := make([]string, 0, len(ports))
	for k, v := range Env(cfg.Service, ports) {
		env = append(env, k+"="+v)
	}
	run, err := p.runner(cfg)
	if err != nil {
		return nil, spec, err
	}
	exec := func(ctx context.Context, argv []string) error {
		return run.RunCommand(ctx, argv, env, Discard{}, Discard{})
	}
	check, err := spec.Check(Address(cfg.Service), ports, p.client, exec)
	return check, spec, err
}

// runner runs cfg's command probes: as the pool's probe user and group
// (config.Pool.ProbeAccount, the workers' unless readiness.user says
// otherwise), or as the daemon when that is none.
func (p *Probes[W]) runner(cfg *config.Pool) (source.CommandRunner, error) {
	user, group := cfg.ProbeAccount()
	switch {
	case user == "" && group == "":
		return p.run, nil
	case p.runAs == nil:
		return nil, fmt.Errorf("no runner can run the command probe as user %q", user)
	}
	return p.runAs(user, group), nil
}

// Add probes w as id, from initial, every startPeriod (when not 0) until
// it is first ready (probe.Target.StartPeriod).
func (p *Probes[W]) Add(w W, id string, check probe.Check, spec probe.Spec, initial probe.State, startPeriod time.Duration) error {
	if err := p.prober.Add(probe.Target{ID: id, Check: check, Spec: spec, Initial: initial, StartPeriod: startPeriod}); err != nil {
		return err
	}
	p.byID[id] = w
	return nil
}

// Remove stops probing id.
func (p *Probes[W]) Remove(id string) {
	if p.prober != nil {
		p.prober.Remove(id)
	}
	delete(p.byID, id)
}

// Get is the replica probed as id.
func (p *Probes[W]) Get(id string) (W, bool) {
	w, ok := p.byID[id]
	return w, ok
}

// C is the prober's channel of transitions, nil without one.
func (p *Probes[W]) C() <-chan probe.Transition {
	if p == nil || p.prober == nil {
		return nil
	}
	return p.prober.Transitions()
}

// Close stops the prober.
func (p *Probes[W]) Close() {
	if p.prober != nil {
		p.prober.Close()
	}
}

// StartProbeWake is how often a starting replica of a pool with a wake
// address is probed until it is first ready: a held request waits for it,
// and a period_sec of 1 s would add half a second on average, 100 ms still
// 50 ms, 25 ms some 12 ms (the sandbox's cold request: 14 ms from the
// replica's own "ready" to its admission). The cost is bounded: 100
// attempts a second on a kept-alive loopback connection for each such
// replica only while it starts (at most ready_timeout_sec; a 1.5 s start
// is 150 attempts), none once it has been ready, and a replica is never
// probed twice at once, so a slow one is not hammered (a check still
// running skips its rounds).
const StartProbeWake = 10 * time.Millisecond

// StartPeriod is a new replica's probe.Target.StartPeriod: fast for a
// pool with a wake address, none for the others.
func StartPeriod(cfg *config.Pool) time.Duration {
	if cfg.Service.WakeAddress() == "" {
		return 0
	}
	return StartProbeWake
}
