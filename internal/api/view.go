package api

import "time"

// View is a pool as `status --json` shows it. The field names are stable:
// scripts read them.
type View struct {
	Pool string `json:"pool"`
	// Mode is "active", "paused", "pinned" or "dry-run" (a paused or pinned
	// dry-run pool says paused or pinned, with DryRun set).
	Mode     string    `json:"mode"`
	DryRun   bool      `json:"dry_run"`
	Override *Override `json:"override,omitempty"`

	Workers WorkerCounts `json:"workers"`
	// Queue is nil until the source has been read once.
	Queue  *QueueView `json:"queue"`
	Source SourceView `json:"source"`

	// Degraded is set while the pool's baseline (min_workers) workers keep
	// failing; nil otherwise.
	Degraded *Degraded `json:"degraded,omitempty"`

	// Fleet is set for a pool that joins a fleet (issue 20).
	Fleet *FleetView `json:"fleet,omitempty"`

	// Wake is set for a service pool with a wake address (issue 29).
	Wake *WakeView `json:"wake,omitempty"`

	LastDecision *Explanation `json:"last_decision,omitempty"`
	WorkerList   []WorkerView `json:"worker_list"`
	// UpdatedAt is when the pool's last tick ended (wall clock).
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// WorkerCounts are the pool's worker numbers.
type WorkerCounts struct {
	Live     int `json:"live"`
	Draining int `json:"draining"`
	Target   int `json:"target"`
	Min      int `json:"min"`
	Max      int `json:"max"`
	// Ready and NotReady split Live for a service pool (issue 19): the
	// replicas in discovery, and those starting or failing their
	// readiness. nil for a pool of queue workers.
	Ready    *int `json:"ready,omitempty"`
	NotReady *int `json:"not_ready,omitempty"`
	// GroupSize is the ranks of a gang pool's groups, which the counts
	// above count; 0 for a pool of single units.
	GroupSize int `json:"group_size,omitempty"`
	// Starting and Stopping are the starts and stops in flight: asked of
	// systemd, its answer not back yet. Starting workers are not in Live.
	Starting int `json:"starting,omitempty"`
	Stopping int `json:"stopping,omitempty"`
}

// QueueView is the queue as the source last read it (the queue's own view:
// jobs running on draining workers included).
type QueueView struct {
	Pending int64 `json:"pending"`
	Running int64 `json:"running"`
	Paused  int64 `json:"paused"`
	// OldestAgeSec is nil when nothing is ready or the source cannot tell.
	OldestAgeSec *float64 `json:"oldest_age_sec"`
}

// SourceView is the source's health.
type SourceView struct {
	Type        string    `json:"type"`
	Healthy     bool      `json:"healthy"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// WorkerView is one worker.
type WorkerView struct {
	Slot  int    `json:"slot"`
	Unit  string `json:"unit"`
	State string `json:"state"` // "active" or "draining"
	// UptimeSec is nil for a draining unit (its start is not tracked).
	UptimeSec *float64 `json:"uptime_sec"`
	// CPUPercent is the use over the last tick, in percent of one CPU;
	// nil until the worker has been sampled over a full tick.
	CPUPercent *float64 `json:"cpu_percent"`
	// MemoryBytes is nil where the cgroup does not tell (no memory
	// controller on the unified hierarchy).
	MemoryBytes *uint64 `json:"memory_bytes"`
	// Restarts counts the crashes of its slot since the daemon started.
	Restarts int `json:"restarts"`
	// Readiness is a service replica's: "ready", "starting" or
	// "not-ready" ("" for a queue worker or a draining replica), and Ports
	// its ports by name.
	Readiness string         `json:"readiness,omitempty"`
	Ports     map[string]int `json:"ports,omitempty"`
}

// Degraded is a pool short of its baseline (min_workers) because a worker
// keeps failing.
type Degraded struct {
	Since  time.Time `json:"since"`
	Reason string    `json:"reason"`
}

// FleetView is a fleet pool's coordination as this host sees it.
type FleetView struct {
	Store  string `json:"store"`   // "redis" or "postgres"
	HostID string `json:"host_id"` // this host's
	// Leader is the lease's holder as this host last read it ("" = none),
	// IsLeader whether that is this host, Epoch the lease's epoch.
	Leader   string `json:"leader"`
	IsLeader bool   `json:"is_leader"`
	Epoch    uint64 `json:"epoch"`
	// PlanEpoch, Target and PlanAgeSec are the plan held: its epoch, the
	// fleet's target, its age on the store's clock (nil: no plan yet).
	PlanEpoch  uint64   `json:"plan_epoch"`
	Target     int      `json:"target"`
	PlanAgeSec *float64 `json:"plan_age_sec"`
	// Share is what this host applies; Phase why: "fresh", "joining",
	// "hold", "fallback" or "none".
	Share int    `json:"share"`
	Phase string `json:"phase"`
	// Reachable says whether the store answered the last tick; Error is
	// its failure, or the leader's source read's.
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// Hosts are the plan's hosts and the live members, by id: each one's
	// share, and its live count and capacity as its last heartbeat said
	// (the leader knows them; a follower's status reads them from the
	// store when asked; -1 when unknown, MembersError saying why).
	Hosts        []FleetHost `json:"hosts"`
	MembersError string      `json:"members_error,omitempty"`
	// CallsPerTick is the store calls of this host's last tick.
	CallsPerTick int `json:"calls_per_tick"`
}

// FleetHost is one host of a fleet pool.
type FleetHost struct {
	ID       string `json:"id"`
	Share    int    `json:"share"`
	Live     int    `json:"live"`
	Capacity int    `json:"capacity"`
}
