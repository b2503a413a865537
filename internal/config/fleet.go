package config

import "time"

// Fleet mode (issue 20): many hosts run one pool on one queue, and one
// leader, elected by a lease in a coordination store (the Redis or the
// PostgreSQL the queue already lives in), decides the fleet's target and
// splits it across the hosts (internal/fleet).
//
// The daemon-level [fleet] table names the store and its timings for every
// pool that joins a fleet; a pool joins with its own [pools.NAME.fleet]
// table, which may name another store (its own connection keys) and says
// how many workers this host holds for it. In a pool that joins,
// min_workers and max_workers are the fleet's, not the host's.

// Defaults of the [fleet] timings.
const (
	DefaultFleetTTL       = 15 * time.Second
	DefaultFleetHeartbeat = 3 * time.Second
)

// The coordination stores, as Fleet.Store names them.
const (
	FleetStoreRedis    = "redis"
	FleetStorePostgres = "postgres"
)

// Fleet is the coordination store and its timings: the [fleet] table, or a
// pool's [pools.NAME.fleet] over it.
type Fleet struct {
	// Conn is the store: redis://, rediss://, postgres:// or
	// postgresql://, with the same keys and checks as the sources'
	// (url_file, url_credential, password_file, password_credential).
	Conn
	// Store is FleetStoreRedis or FleetStorePostgres, from the URL's
	// scheme ("" while the URL comes from a credential not read yet: the
	// daemon tells at start).
	Store string `toml:"-"`
	// HostID is this host's id in the fleet (host_id; default the
	// contents of /etc/machine-id). Only the [fleet] table sets it.
	HostID string `toml:"host_id,omitempty"`
	// TTL is the lease's (ttl_sec, default 15 s); Heartbeat the
	// coordination tick: every host's heartbeat and the leader's decision
	// (heartbeat_sec, default 3 s, at most ttl/2); Renew how often the
	// lease is renewed (renew_sec, default ttl/3, under ttl); Hold how long
	// a stale plan is held before the fallback to a local share of
	// min_workers (hold_sec, default 2 × ttl).
	TTL       time.Duration `toml:"ttl_sec,omitzero"`
	Heartbeat time.Duration `toml:"heartbeat_sec,omitzero"`
	Renew     time.Duration `toml:"renew_sec,omitzero"`
	Hold      time.Duration `toml:"hold_sec,omitzero"`
}

// PoolFleet is a pool's [pools.NAME.fleet] table: the pool joins a fleet.
type PoolFleet struct {
	// Fleet is the [fleet] table's settings with this table's own keys
	// (connection keys, timings) over them.
	Fleet
	// Capacity is how many workers (groups, in a gang pool) this host
	// holds for the pool: capacity = N, or "auto" (the default,
	// CapacityAuto): what the host's capacity check fits, at most
	// max_workers. ApplyCapacity resolves "auto" into Capacity.
	Capacity     int  `toml:"capacity,omitempty"`
	CapacityAuto bool `toml:"-"`
}

// Joins says whether the pool takes part in a fleet.
func (p *Pool) Joins() bool { return p != nil && p.Fleet != nil }
