package config

import (
	"maps"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
	"golang.org/x/sys/unix"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// DefaultUser runs the workers of pools that name no user. Root is never a
// default: it has to be written out.
const DefaultUser = "flexiq"

var (
	// Pool names end up in unit names (flexiq-NAME@SLOT.service,
	// flexiq-NAME.slice) and metric labels, so they are kept to characters
	// that need no escaping anywhere: no "-" (slice nesting), no "@"
	// (template instance), no "/" or "." (paths), no white space.
	poolNameRE = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)
	envNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// reservedEnv are set by the daemon on every worker, so that a worker knows
// which pool and slot it is; a pool must not override them.
var reservedEnv = []string{"FLEXIQ_SCALED_POOL", "FLEXIQ_SCALED_SLOT"}

// defaultPool is a pool with every default of flexiq's AutoscaleConfig.
func defaultPool(name string, poll time.Duration) *Pool {
	return &Pool{
		Name:                      name,
		User:                      DefaultUser,
		MinWorkers:                1,
		MaxWorkers:                10,
		TargetQueueDepthPerWorker: 15,
		TargetUtilisation:         0.75,
		ThreadsPerWorker:          4,
		CPUPerWorker:              1.0,
		Tolerance:                 0.1,
		ScaleUpWindow:             0,
		ScaleDownWindow:           300 * time.Second,
		PollInterval:              poll,
		DrainTimeout:              30 * time.Second,
		DrainSignal:               "SIGTERM",
		DrainSignalNumber:         int(unix.SIGTERM),
		Hardening:                 HardeningDefault,
		MaxSurge:                  1,
		Mode:                      ModeActive,
		Source:                    Source{Type: DefaultSourceType},
	}
}

// PolicyParams are the pool's scaling knobs as the policy package takes them.
func (p *Pool) PolicyParams() policy.Params {
	return policy.Params{
		MinWorkers:                p.MinWorkers,
		MaxWorkers:                p.MaxWorkers,
		TargetQueueDepthPerWorker: p.TargetQueueDepthPerWorker,
		TargetUtilisation:         p.TargetUtilisation,
		ThreadsPerWorker:          p.ThreadsPerWorker,
		TargetCPUUtilisation:      p.TargetCPUUtilisation,
		TargetQueueLatency:        time.Duration(math.Round(p.TargetQueueLatencySec * float64(time.Second))),
		Tolerance:                 p.Tolerance,
		ScaleUpWindow:             p.ScaleUpWindow,
		ScaleDownWindow:           p.ScaleDownWindow,
		Demand:                    p.Demand,
		DemandWindow:              p.DemandWindow,
		OnsetMinJobs:              p.OnsetMinJobs,
		KeepWarmWorkers:           p.KeepWarmWorkers,
		KeepWarm:                  p.KeepWarm,
		PollInterval:              p.PollInterval,
		NoQueue:                   p.NoQueue(),
	}
}

// pool builds and checks one [pools.NAME] table.
func (l *loader) pool(name string, r *rawPool, daemonPoll time.Duration) *Pool {
	key := func(parts ...string) string {
		return toml.Key(append([]string{"pools", name}, parts...)).String()
	}
	if !poolNameRE.MatchString(name) {
		l.add(key(), "pool name must match [a-z0-9_]{1,32}; it becomes part of unit names")
	}
	p := defaultPool(name, daemonPoll)

	l.command(p, r, key)
	l.identity(p, r, key)
	l.rollout(p, r, key)

	l.targets(p, r, key)
	for _, d := range []struct {
		name string
		v    value
		dst  *time.Duration
	}{
		{"scale_up_window_sec", r.ScaleUpWindowSec, &p.ScaleUpWindow},
		{"scale_down_window_sec", r.ScaleDownWindowSec, &p.ScaleDownWindow},
		{"drain_timeout_sec", r.DrainTimeoutSec, &p.DrainTimeout},
	} {
		if l.seconds(key(d.name), d.v, d.dst) && *d.dst < 0 {
			l.add(key(d.name), "must be >= 0")
		}
	}
	if l.seconds(key("poll_interval_sec"), r.PollIntervalSec, &p.PollInterval) && p.PollInterval < minPollInterval {
		l.add(key("poll_interval_sec"), "must be >= 0.1")
	}
	l.drainSignal(p, r, key)
	l.readiness(p, r, key)
	l.svc.service(p, r.Service, key)
	l.misplacedWake(p, r.Wake)
	l.source(p, r.Source, func(k string) string { return key("source", k) })
	l.demand(p, r, key)
	l.warm(p, r, key)
	if threads := threadsSources(); p.ThreadsAuto && !slices.Contains(threads, p.Source.Type) {
		l.add(key("threads_per_worker"), `"auto" reads flexiq's workers: only for %s sources, not %s`,
			strings.Join(threads, ", "), p.Source.Type)
	}
	l.limits(p, &r.Limits, func(k string) string { return key("limits", k) })
	l.scaling(p, &r.rawScaling, key)
	l.fleet.pool(p, r.Fleet, key)
	l.noQueue(p, r, key)
	return p
}

// targets fills the worker bounds and the targets of the HPA formula and
// its signals (threads_per_worker among them), each checked on its own
// range.
func (l *loader) targets(p *Pool, r *rawPool, key func(...string) string) {
	if l.integer(key("min_workers"), r.MinWorkers, &p.MinWorkers) && p.MinWorkers < 0 {
		l.add(key("min_workers"), "must be >= 0")
	}
	l.integer(key("max_workers"), r.MaxWorkers, &p.MaxWorkers)
	switch {
	case p.MaxWorkers < 1:
		l.add(key("max_workers"), "must be >= 1")
	case p.MaxWorkers < p.MinWorkers:
		l.add(key("max_workers"), "must be >= min_workers (%d)", p.MinWorkers)
	}
	if l.number(key("target_queue_depth_per_worker"), r.TargetQueueDepthPerWorker, &p.TargetQueueDepthPerWorker) &&
		p.TargetQueueDepthPerWorker < 1 {
		l.add(key("target_queue_depth_per_worker"), "must be >= 1")
	}
	if l.number(key("target_utilisation"), r.TargetUtilisation, &p.TargetUtilisation) &&
		!(p.TargetUtilisation > 0 && p.TargetUtilisation <= 1) {
		l.add(key("target_utilisation"), "must be in (0, 1]")
	}
	l.threads(p, r, key)
	if l.number(key("target_cpu_utilisation"), r.TargetCPUUtilisation, &p.TargetCPUUtilisation) &&
		!(p.TargetCPUUtilisation > 0 && p.TargetCPUUtilisation <= 1) {
		l.add(key("target_cpu_utilisation"), "must be in (0, 1]; leave it out to turn the CPU signal off")
	}
	// Read as a duration for its range check, kept in seconds so that the
	// field is named after its key.
	if latency := time.Duration(0); l.seconds(key("target_queue_latency_sec"), r.TargetQueueLatencySec, &latency) {
		if latency <= 0 {
			l.add(key("target_queue_latency_sec"), "must be > 0; leave it out to turn the queue latency signal off")
		} else {
			p.TargetQueueLatencySec = latency.Seconds()
		}
	}
	if l.number(key("cpu_per_worker"), r.CPUPerWorker, &p.CPUPerWorker) && p.CPUPerWorker <= 0 {
		l.add(key("cpu_per_worker"), "must be > 0")
	}
	if l.number(key("tolerance"), r.Tolerance, &p.Tolerance) && !(p.Tolerance >= 0 && p.Tolerance < 1) {
		l.add(key("tolerance"), "must be in [0, 1)")
	}
}

// command fills Exec from exec or from the app shortcut.
func (l *loader) command(p *Pool, r *rawPool, key func(...string) string) {
	switch {
	case r.App.set() && r.Exec.set():
		l.add(key("exec"), "set either exec or app, not both")
	case r.App.set():
		if l.str(key("app"), r.App, &p.App) {
			if p.App == "" {
				l.add(key("app"), "must not be empty")
				return
			}
			p.Exec = []string{"flexiq", "worker", "--app", p.App}
		}
	case !r.Exec.set():
		l.add(key("exec"), "missing: set exec (the worker command line) or app")
	default:
		var exec []string
		if !l.strings(key("exec"), r.Exec, &exec) {
			return
		}
		switch {
		case len(exec) == 0:
			l.add(key("exec"), "must not be empty")
		case exec[0] == "":
			l.add(key("exec"), "the command (first element) must not be empty")
		case !filepath.IsAbs(exec[0]) && (strings.Contains(exec[0], "/") || exec[0] == "." || exec[0] == ".."):
			// systemd refuses it at every start, as "neither a valid
			// executable name nor an absolute path".
			l.add(key("exec"), "the command %q must be an absolute path, or a plain file name that systemd looks up in its fixed search path", exec[0])
		default:
			p.Exec = exec
		}
	}
}

// identity fills what the worker runs as and in.
func (l *loader) identity(p *Pool, r *rawPool, key func(...string) string) {
	if l.str(key("user"), r.User, &p.User) {
		p.UserExplicit = true
		l.accountName(key("user"), p.User)
	}
	// Unset, the group stays empty: systemd then uses the user's primary
	// group, which need not be named like the user (nobody's is nogroup).
	if l.str(key("group"), r.Group, &p.Group) {
		l.accountName(key("group"), p.Group)
	}
	if l.str(key("working_directory"), r.WorkingDirectory, &p.WorkingDirectory) && !filepath.IsAbs(p.WorkingDirectory) {
		l.add(key("working_directory"), "must be an absolute path")
	}
	l.environmentFiles(p, r, key)
	var env map[string]string
	if !l.stringMap(key("environment"), r.Environment, &env) {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		switch k := key("environment", name); {
		case !envNameRE.MatchString(name):
			l.add(k, "not a valid environment variable name")
		case slices.Contains(reservedEnv, name):
			l.add(k, "reserved: flexiq-scaled sets it on every worker")
		}
	}
	if len(env) > 0 {
		p.Environment = env
	}
}

// accountName refuses the user and group names that systemd's User= and
// Group= refuse outright (measured against systemd 252: it takes "a b",
// "a.b", "a@b", "-x" and non-ASCII names, but not these). Whether the name
// exists is a question for the machine (hostcheck.CheckUsers), not for the file.
func (r *reader) accountName(key, name string) {
	switch {
	case name == "":
		r.add(key, "must not be empty")
	case name == "." || name == "..":
		r.add(key, "%q is not a valid user or group name", name)
	case strings.ContainsAny(name, ":/"):
		r.add(key, "%q is not a valid user or group name: it must not contain \":\" or \"/\"", name)
	case !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0:
		r.add(key, "%q is not a valid user or group name: it must be UTF-8 without control characters", name)
	case strings.TrimSpace(name) != name:
		r.add(key, "%q is not a valid user or group name: it must not start or end with white space", name)
	}
}

// environmentFiles fills EnvironmentFiles from a string or an array of
// strings. Each is systemd's EnvironmentFile=: an absolute path, with a
// leading "-" meaning that a missing file is not an error.
func (l *loader) environmentFiles(p *Pool, r *rawPool, key func(...string) string) {
	k := key("environment_file")
	var files []string
	switch raw := r.EnvironmentFile.raw.(type) {
	case nil:
		return
	case string:
		files = []string{raw}
	case []any:
		if !l.strings(k, r.EnvironmentFile, &files) {
			return
		}
	default:
		l.wrongType(k, "a string or an array of strings", r.EnvironmentFile)
		return
	}
	good := true
	for _, f := range files {
		path := strings.TrimPrefix(f, "-")
		switch {
		case !filepath.IsAbs(path):
			l.add(k, "%q must be an absolute path (optionally after a \"-\", for \"ignore if missing\")", f)
			good = false
		case strings.IndexFunc(path, unicode.IsControl) >= 0 || !utf8.ValidString(path):
			l.add(k, "%q must be UTF-8 without control characters", f)
			good = false
		}
	}
	if good && len(files) > 0 {
		p.EnvironmentFiles = files
	}
}

// Hardening presets; what each sets on the worker units is internal/units'.
const (
	HardeningNone    = "none"
	HardeningDefault = "default"
	HardeningStrict  = "strict"
)

// rollout fills the keys that govern workers and their replacement.
func (l *loader) rollout(p *Pool, r *rawPool, key func(...string) string) {
	if l.str(key("hardening"), r.Hardening, &p.Hardening) &&
		!slices.Contains([]string{HardeningNone, HardeningDefault, HardeningStrict}, p.Hardening) {
		l.add(key("hardening"), "unknown preset %q (want %q, %q or %q)", p.Hardening, HardeningNone, HardeningDefault, HardeningStrict)
		p.Hardening = HardeningDefault
	}
	if l.integer(key("max_surge"), r.MaxSurge, &p.MaxSurge) && p.MaxSurge < 1 {
		l.add(key("max_surge"), "must be >= 1")
	}
	if l.str(key("mode"), r.Mode, &p.Mode) && p.Mode != ModeActive && p.Mode != ModeDryRun {
		l.add(key("mode"), "unknown mode %q (want %q or %q)", p.Mode, ModeActive, ModeDryRun)
		p.Mode = ModeActive
	}
}

// Pool modes: a dry-run pool decides and logs, and never acts.
const (
	ModeActive = "active"
	ModeDryRun = "dry-run"
)

func (l *loader) drainSignal(p *Pool, r *rawPool, key func(...string) string) {
	l.signal(key("drain_signal"), r.DrainSignal, &p.DrainSignal, &p.DrainSignalNumber)
}
