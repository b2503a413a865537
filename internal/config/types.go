// Package config loads, defaults and validates /etc/flexiq-scaled/config.toml.
package config

import "time"

// DefaultPath is where the daemon looks for its configuration.
const DefaultPath = "/etc/flexiq-scaled/config.toml"

// Config is the validated, defaulted configuration of the daemon.
type Config struct {
	// Path is the file the configuration was read from; errors name it.
	Path   string
	Daemon Daemon
	// HostGuard is the [host_guard] table; nil when there is none.
	HostGuard *HostGuard
	// Capacity is the [capacity] table: the host's budget for workers.
	Capacity Capacity
	// Prometheus is the [prometheus] table, the server that the promql()
	// of trigger rules queries (prometheus.go); nil when there is none.
	Prometheus *Prometheus
	// Fleet is the [fleet] table, the coordination store of the pools that
	// join a fleet (fleet.go); nil when there is none.
	Fleet *Fleet
	// Pools by name. Names match [a-z0-9_]{1,32}.
	Pools map[string]*Pool
	// DropIns are the files of DropInDir(Path) that were read, in the
	// order read (lexical).
	DropIns []string
	// PoolFiles names the drop-in that defines a pool; pools of Path are
	// not in it. FileOf reads it.
	PoolFiles map[string]string
}

// Daemon holds the [daemon] table.
type Daemon struct {
	PollInterval time.Duration // poll_interval_sec; default tick for pools that set none
}

// Pool is one [pools.NAME] table, with every default filled in.
type Pool struct {
	Name string
	App  string   // shortcut for Exec = ["flexiq", "worker", "--app", App]
	Exec []string // effective command line (App expanded)
	User string   // default "flexiq"
	// UserExplicit is true when user was written in the file. Only then
	// may User be "root": no default ever is.
	UserExplicit bool
	// Group is empty unless written: systemd then uses the user's primary
	// group, as the worker units leave Group= out.
	Group            string
	WorkingDirectory string
	Environment      map[string]string
	// EnvironmentFiles are systemd's EnvironmentFile= paths, as written: a
	// leading "-" means a missing file is ignored.
	EnvironmentFiles []string
	// Hardening is the sandboxing preset of the worker units: "none",
	// "default" or "strict" (HardeningNone...).
	Hardening string
	// Mode is ModeActive, or ModeDryRun: the pool decides and logs what it
	// would do, and never starts or stops a unit.
	Mode string
	// MaxSurge is how many workers a rollout may start above the current
	// count while it replaces workers whose definition changed.
	MaxSurge int

	MinWorkers                int
	MaxWorkers                int
	TargetQueueDepthPerWorker float64
	TargetUtilisation         float64
	ThreadsPerWorker          int
	// ThreadsAuto: threads_per_worker = "auto", read from flexiq's live
	// workers (source.ThreadsReporter); ThreadsPerWorker is then the
	// fallback (threads_per_worker_fallback).
	ThreadsAuto           bool
	TargetCPUUtilisation  float64 // 0 means the CPU signal is off
	TargetQueueLatencySec float64 // 0 means the queue latency signal is off
	CPUPerWorker          float64
	Tolerance             float64
	ScaleUpWindow         time.Duration
	ScaleDownWindow       time.Duration
	PollInterval          time.Duration
	DrainTimeout          time.Duration
	DrainSignal           string // e.g. "SIGTERM"
	DrainSignalNumber     int    // e.g. 15

	// Requires are units the workers need (Requires= and After=); while
	// one is not active, scale-ups are deferred (see readiness.go).
	Requires []string
	// StartCondition is the worker units' ExecCondition= command line;
	// nil = none.
	StartCondition []string
	// QuietSignal (e.g. "SIGTSTP") starts a two-phase drain: sent at
	// scale-down, the stop follows QuietPeriod later. "" = one phase.
	QuietSignal       string
	QuietSignalNumber int
	QuietPeriod       time.Duration
	// Demand is the opt-in demand signal (policy.DemandNone or
	// policy.DemandLittlesLaw); DemandWindow what it is measured over.
	Demand       string
	DemandWindow time.Duration
	// OnsetMinJobs (0 = off) turns on the burst-onset signal;
	// KeepWarmWorkers (0 = off) is a floor under scale-downs for KeepWarm
	// after the last work (policy/warm.go).
	OnsetMinJobs    int
	KeepWarmWorkers int
	KeepWarm        time.Duration

	Source Source
	// Service is the [pools.NAME.service] table (service.go); nil for a
	// pool of queue workers.
	Service *Service
	Limits  Limits
	// Scaling is the policy beyond the HPA formula (rules.go).
	Scaling Scaling
	// Prometheus is the daemon's [prometheus], kept by a pool whose rules
	// use promql() and whose source does not serve it (prometheus.go);
	// nil otherwise: a pool whose source is prometheus queries its own.
	Prometheus *Prometheus
	// Fleet is set when the pool joins a fleet ([pools.NAME.fleet],
	// fleet.go): MinWorkers and MaxWorkers are then the fleet's.
	Fleet *PoolFleet
}

// Source is the [pools.NAME.source] table: its type, registered by its own
// file in internal/source (RegisterSourceType, sourcetype.go), and the
// settings that type's Decode checked.
type Source struct {
	Type string // a registered source type, e.g. "flexiq-sqlite"
	// Settings are a struct of the type's own (source.FlexiqSQLiteSettings),
	// whose exported fields carry their keys as toml tags.
	Settings any
}

// Conn is where a network source connects. The credentials never sit in the
// configuration file in clear: the URL may come from a file or a systemd
// credential, and the password from another.
//
// A source type's settings embed it: its keys are then the table's own
// (WriteEffective, Diff), and SourceConn tells hostcheck.CheckCredentials
// where the secrets are.
type Conn struct {
	URL                string `toml:"url,omitempty"`                 // redis://, postgres://, http(s):// without a password
	URLFile            string `toml:"url_file,omitempty"`            // a root-only file holding the URL
	URLCredential      string `toml:"url_credential,omitempty"`      // a systemd credential ($CREDENTIALS_DIRECTORY/NAME) holding the URL
	PasswordFile       string `toml:"password_file,omitempty"`       // a root-only file holding the password
	PasswordCredential string `toml:"password_credential,omitempty"` // a systemd credential holding the password
}

// SourceConn returns c; settings that embed a Conn have it too.
func (c Conn) SourceConn() Conn { return c }

// connOf is where s connects: its settings' Conn, zero for a source that
// does not connect.
func connOf(s Source) Conn {
	if c, ok := s.Settings.(interface{ SourceConn() Conn }); ok {
		return c.SourceConn()
	}
	return Conn{}
}

// Limits is the optional [pools.NAME.limits] table, passed as unit properties.
// Zero values mean "not set".
type Limits struct {
	CPUQuota           string // as written, e.g. "100%"
	CPUQuotaPerSecUSec uint64 // derived: 100% = 1_000_000
	MemoryMax          string // as written, e.g. "1G"
	MemoryMaxBytes     uint64 // derived
	TasksMax           uint64
}
