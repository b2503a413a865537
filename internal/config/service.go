package config

import (
	"time"

	"github.com/flexiq/flexiq-scaled/internal/discovery"
	"github.com/flexiq/flexiq-scaled/internal/probe"
)

// Service is the [pools.NAME.service] table (issue 19): the pool's workers
// are replicas that serve traffic. They get ports, they are admitted by a
// readiness check, the ready ones are published to discovery files for a
// load balancer and to Prometheus, and a leaving one leaves discovery a
// drain period before it is stopped. nil for a pool of queue workers.
type Service struct {
	// Ports are the replicas' named ports, sorted by name. Each replica
	// sees FLEXIQ_PORT_<NAME> (the name upper-cased) in its environment.
	Ports []Port
	// Readiness says when a replica is ready to serve.
	Readiness Readiness
	// Address is the address written to discovery for every replica
	// (address); default DefaultServiceAddress.
	Address string
	// MetricsPort names the port that Prometheus scrapes through the
	// file_sd file (metrics_port); "" = no file_sd file.
	MetricsPort string
	// DiscoveryDir holds POOL.json and POOL.file_sd.json (discovery_dir);
	// default discovery.DefaultDir.
	DiscoveryDir string
	// Templates are the user's files rendered from the ready set
	// ([[pools.NAME.service.template]]), parsed at load.
	Templates []*discovery.Template

	// DrainPeriod is how long a leaving replica stays up after it has left
	// discovery and the after-change commands have run (drain_period_sec);
	// default DefaultDrainPeriod. 0 stops it at once.
	DrainPeriod time.Duration
	// ReadyTimeout: a replica not ready this long after it started is
	// stopped and replaced (ready_timeout_sec); default DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// UnreadyTimeout: a replica that was ready and has been unready this
	// long is stopped and replaced (unready_timeout_sec); default
	// DefaultUnreadyTimeout. Meanwhile it is out of discovery.
	UnreadyTimeout time.Duration

	// GroupSize is the number of ranks of each replica (group_size); 1 = a
	// replica is one unit. min_workers and max_workers count groups.
	GroupSize int
	// CPUSetSplit splits the CPUs the pool may use across a group's ranks
	// (AllowedCPUs=), no two ranks of a group on one core (cpuset_split).
	CPUSetSplit bool

	// Wake is the pool's wake address ([pools.NAME.service.wake], issue
	// 29); Listen "" = none.
	Wake Wake
}

// Defaults of the [pools.NAME.service] table.
const (
	DefaultServiceAddress = "127.0.0.1"
	DefaultDrainPeriod    = 30 * time.Second
	DefaultReadyTimeout   = 5 * time.Minute
	DefaultUnreadyTimeout = time.Minute
)

// Port is one named port of a service pool's replicas
// ([pools.NAME.service.ports], NAME = "auto" or a base number).
type Port struct {
	Name string // [a-z][a-z0-9_]*, at most 32 characters
	// Base is 0 for "auto": the daemon picks a free port per replica (and
	// per rank). Else slot N, rank R gets Base + (N-1)*GroupSize + R, so a
	// pool's fixed range is [Base, Base + max_workers*GroupSize - 1].
	Base int
	// Socket: systemd binds the port, in a socket unit started with the
	// replica, and passes it to the replica (LISTEN_FDS, LISTEN_FDNAMES =
	// Name); the replica binds nothing itself. At most one port per pool,
	// and only with GroupSize 1.
	Socket bool
}

// EnvName is the variable that carries the port to each replica.
func (p Port) EnvName() string { return PortEnvPrefix + upperASCII(p.Name) }

// PortEnvPrefix starts every port's variable, e.g. FLEXIQ_PORT_HTTP.
const PortEnvPrefix = "FLEXIQ_PORT_"

// Environment a gang group's ranks see beside their ports: the rank
// (0 … GroupSize-1), the group size, and for each port NAME the peers'
// ADDRESS:PORT in rank order, comma-separated (FLEXIQ_PEERS_<NAME>).
const (
	RankEnv        = "FLEXIQ_RANK"
	GroupSizeEnv   = "FLEXIQ_GROUP_SIZE"
	PeersEnvPrefix = "FLEXIQ_PEERS_"
)

// Readiness kinds. ReadyActive (the default) is ready as soon as systemd
// says the unit is active; ReadyNotify runs the workers as Type=notify, so
// that active means the worker sent READY=1; the others are probes.
const (
	ReadyActive  = "active"
	ReadyNotify  = "notify"
	ReadyHTTP    = string(probe.KindHTTP)
	ReadyTCP     = string(probe.KindTCP)
	ReadyCommand = string(probe.KindCommand)
)

// Readiness is the [pools.NAME.service.readiness] table.
type Readiness struct {
	Kind string // ReadyActive, ReadyNotify, ReadyHTTP, ReadyTCP or ReadyCommand
	// Probe is the probe for ReadyHTTP, ReadyTCP and ReadyCommand, with
	// its defaults filled in (probe.Spec.WithDefaults).
	Probe probe.Spec
	// User is who a ReadyCommand probe runs as: readiness.user as
	// written, else the pool's user; "" for other kinds, and for a pool
	// without a user (a user manager's). Pool.ProbeAccount says what its
	// unit gets.
	User string
}

// ProbeAccount is the user and group a command readiness probe's unit runs
// as (User= and Group=, as the workers' units get them): the pool's user
// and group, unless readiness.user names another user, whose primary group
// the probe then takes. "" and "" run it as the daemon does (root): a
// readiness.user of root's ("root", "0"), a pool without a user, or a
// readiness that is not a command probe.
func (p *Pool) ProbeAccount() (user, group string) {
	if p.Service == nil || p.Service.Readiness.Kind != ReadyCommand {
		return "", ""
	}
	switch u := p.Service.Readiness.User; {
	case u == "":
		return "", ""
	case u == p.User:
		return p.User, p.Group
	case IsRootSpelling(u):
		return "", ""
	default:
		return u, ""
	}
}

// IsService says whether the pool's workers are a service's replicas.
func (p *Pool) IsService() bool { return p.Service != nil }

// GroupSize is the number of units per worker: 1 unless the pool is a
// service with gang groups.
func (p *Pool) GroupSize() int {
	if p.Service == nil || p.Service.GroupSize < 1 {
		return 1
	}
	return p.Service.GroupSize
}

func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
