package config

import (
	"fmt"
	"io"

	"github.com/BurntSushi/toml"
)

// The effective* types mirror the file's schema with Go types the TOML
// encoder writes directly. Durations become float seconds so that sub-second
// values survive; optional settings that are off are left out, because
// writing their zero value would read back as a (mostly invalid) setting.

type effectiveFile struct {
	Daemon     effectiveDaemon          `toml:"daemon"`
	HostGuard  *effectiveHostGuard      `toml:"host_guard,omitempty"`
	Capacity   *effectiveCapacity       `toml:"capacity,omitempty"`
	Prometheus *effectivePrometheus     `toml:"prometheus,omitempty"`
	Fleet      any                      `toml:"fleet,omitempty"` // Fleet.effective
	Pools      map[string]effectivePool `toml:"pools,omitempty"`
}

type effectivePrometheus struct {
	Conn
	ScrapeIntervalSec float64 `toml:"scrape_interval_sec,omitzero"`
}

type effectiveDaemon struct {
	PollIntervalSec float64 `toml:"poll_interval_sec"`
}

type effectivePool struct {
	App                       string            `toml:"app,omitempty"`
	Exec                      []string          `toml:"exec,omitempty"`
	User                      string            `toml:"user"`
	Group                     string            `toml:"group,omitempty"` // unset: the user's primary group
	WorkingDirectory          string            `toml:"working_directory,omitempty"`
	Environment               map[string]string `toml:"environment,omitempty"`
	EnvironmentFile           []string          `toml:"environment_file,omitempty"`
	Hardening                 string            `toml:"hardening"`
	Mode                      string            `toml:"mode"`
	MaxSurge                  int               `toml:"max_surge"`
	MinWorkers                int               `toml:"min_workers"`
	MaxWorkers                int               `toml:"max_workers"`
	TargetQueueDepthPerWorker float64           `toml:"target_queue_depth_per_worker"`
	TargetUtilisation         float64           `toml:"target_utilisation"`
	ThreadsPerWorker          any               `toml:"threads_per_worker"` // an int, or "auto"
	ThreadsPerWorkerFallback  int               `toml:"threads_per_worker_fallback,omitzero"`
	TargetCPUUtilisation      float64           `toml:"target_cpu_utilisation,omitzero"`
	TargetQueueLatencySec     float64           `toml:"target_queue_latency_sec,omitzero"`
	CPUPerWorker              float64           `toml:"cpu_per_worker"`
	Tolerance                 float64           `toml:"tolerance"`
	ScaleUpWindowSec          float64           `toml:"scale_up_window_sec"`
	ScaleDownWindowSec        float64           `toml:"scale_down_window_sec"`
	Demand                    string            `toml:"demand,omitempty"`
	DemandWindowSec           float64           `toml:"demand_window_sec,omitzero"`
	OnsetMinJobs              int               `toml:"onset_min_jobs,omitzero"`
	KeepWarmWorkers           int               `toml:"keep_warm_workers,omitzero"`
	KeepWarmSec               float64           `toml:"keep_warm_sec,omitzero"`
	PollIntervalSec           float64           `toml:"poll_interval_sec"`
	DrainTimeoutSec           float64           `toml:"drain_timeout_sec"`
	DrainSignal               string            `toml:"drain_signal"`
	Requires                  []string          `toml:"requires,omitempty"`
	StartCondition            []string          `toml:"start_condition,omitempty"`
	QuietSignal               string            `toml:"quiet_signal,omitempty"`
	QuietPeriodSec            float64           `toml:"quiet_period_sec,omitzero"`
	Source                    any               `toml:"source"` // effectiveSourceOf's struct
	Limits                    *effectiveLimits  `toml:"limits,omitempty"`
	Service                   *effectiveService `toml:"service,omitempty"`
	Fleet                     any               `toml:"fleet,omitempty"` // PoolFleet.effective
	effectiveScaling
}

type effectiveLimits struct {
	CPUQuota  string `toml:"cpu_quota,omitempty"`
	MemoryMax string `toml:"memory_max,omitempty"`
	TasksMax  uint64 `toml:"tasks_max,omitzero"`
}

// WriteEffective writes c as TOML with every default filled in. Loading the
// output gives back the same configuration, except that user is then
// written out and so explicit.
func WriteEffective(w io.Writer, c *Config) error {
	f := effectiveFile{
		Daemon:    effectiveDaemon{PollIntervalSec: c.Daemon.PollInterval.Seconds()},
		Pools:     make(map[string]effectivePool, len(c.Pools)),
		HostGuard: c.HostGuard.effective(),
	}
	f.Capacity = c.Capacity.effective()
	if p := c.Prometheus; p != nil {
		f.Prometheus = &effectivePrometheus{Conn: p.Conn, ScrapeIntervalSec: p.ScrapeInterval.Seconds()}
	}
	f.Fleet = c.Fleet.effective()
	for name, p := range c.Pools {
		f.Pools[name] = effectivePoolOf(p)
	}
	if _, err := fmt.Fprintf(w, "# Effective configuration of %q, every default filled in.\n", c.Path); err != nil {
		return fmt.Errorf("write effective config: %w", err)
	}
	for _, d := range c.DropIns {
		if _, err := fmt.Fprintf(w, "# Drop-in: %q\n", d); err != nil {
			return fmt.Errorf("write effective config: %w", err)
		}
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return fmt.Errorf("write effective config: %w", err)
	}
	enc := toml.NewEncoder(w)
	enc.Indent = ""
	if err := enc.Encode(f); err != nil {
		return fmt.Errorf("write effective config: %w", err)
	}
	return nil
}

// effectivePoolOf is p as WriteEffective writes it.
func effectivePoolOf(p *Pool) effectivePool {
	e := effectivePool{
		App:                       p.App,
		User:                      p.User,
		Group:                     p.Group,
		WorkingDirectory:          p.WorkingDirectory,
		Environment:               p.Environment,
		EnvironmentFile:           p.EnvironmentFiles,
		Hardening:                 p.Hardening,
		Mode:                      p.Mode,
		MaxSurge:                  p.MaxSurge,
		MinWorkers:                p.MinWorkers,
		MaxWorkers:                p.MaxWorkers,
		TargetQueueDepthPerWorker: p.TargetQueueDepthPerWorker,
		TargetUtilisation:         p.TargetUtilisation,
		ThreadsPerWorker:          effectiveThreads(p),
		ThreadsPerWorkerFallback:  effectiveThreadsFallback(p),
		TargetCPUUtilisation:      p.TargetCPUUtilisation,
		TargetQueueLatencySec:     p.TargetQueueLatencySec,
		CPUPerWorker:              p.CPUPerWorker,
		Tolerance:                 p.Tolerance,
		ScaleUpWindowSec:          p.ScaleUpWindow.Seconds(),
		ScaleDownWindowSec:        p.ScaleDownWindow.Seconds(),
		Demand:                    p.Demand,
		DemandWindowSec:           effectiveDemandWindow(p),
		OnsetMinJobs:              p.OnsetMinJobs,
		KeepWarmWorkers:           p.KeepWarmWorkers,
		KeepWarmSec:               keepWarmSec(p),
		PollIntervalSec:           p.PollInterval.Seconds(),
		DrainTimeoutSec:           p.DrainTimeout.Seconds(),
		DrainSignal:               p.DrainSignal,
		effectiveScaling:          p.Scaling.effective(),
		Requires:                  p.Requires,
		StartCondition:            p.StartCondition,
		QuietSignal:               p.QuietSignal,
		QuietPeriodSec:            p.QuietPeriod.Seconds(),
		Source:                    effectiveSourceOf(p.Source),
		Service:                   p.Service.effective(),
		Fleet:                     p.Fleet.effective(),
	}
	// app and exec together are an error, and exec is derived from app.
	if p.App == "" {
		e.Exec = p.Exec
	}
	if p.Limits != (Limits{}) {
		e.Limits = &effectiveLimits{
			CPUQuota:  p.Limits.CPUQuota,
			MemoryMax: p.Limits.MemoryMax,
			TasksMax:  p.Limits.TasksMax,
		}
	}
	return e
}
