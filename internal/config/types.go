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
	// Pools by name. Names match [a-z0-9_]{1,32}.
	Pools map[string]*Pool
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
	UserExplicit     bool
	Group            string // default: same as User
	WorkingDirectory string
	Environment      map[string]string

	MinWorkers                int
	MaxWorkers                int
	TargetQueueDepthPerWorker float64
	TargetUtilisation         float64
	ThreadsPerWorker          int
	TargetCPUUtilisation      float64 // 0 means the CPU signal is off
	CPUPerWorker              float64
	Tolerance                 float64
	ScaleUpWindow             time.Duration
	ScaleDownWindow           time.Duration
	PollInterval              time.Duration
	DrainTimeout              time.Duration
	DrainSignal               string // e.g. "SIGTERM"
	DrainSignalNumber         int    // e.g. 15
	MaxSurge                  int    // workers a rollout may start beyond the current count

	Source Source
	Limits Limits
}

// Source is the [pools.NAME.source] table.
type Source struct {
	Type      string   // "flexiq-sqlite" or "sqlite-query"
	Path      string   // database file
	Queues    []string // flexiq-sqlite: optional queue filter; empty = all
	Namespace string   // flexiq-sqlite: optional namespace filter; empty = no filter
	Query     string   // sqlite-query: read-only SELECT returning pending, running
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
