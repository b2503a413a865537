package config

import "slices"

// fleetTimingDocs are the timing keys of [fleet], which a pool's
// [pools.NAME.fleet] may set again for that pool alone.
var fleetTimingDocs = []KeyDoc{
	{Name: "ttl_sec", Type: "seconds", Default: "15", Limits: "`> 0`; at least 2 × `heartbeat_sec`",
		Doc: "How long the leader's lease lasts without a renewal. A leader that dies or is cut off is replaced after at most this long " +
			"(one that stops cleanly resigns at once); shorter fails over faster, and loses the lease sooner to a slow link or a paused host."},
	{Name: "heartbeat_sec", Type: "seconds", Default: "3", Limits: "`> 0`; at most `ttl_sec` / 2",
		Doc: "The coordination tick: how often every host writes its heartbeat (capacity, live, starting and draining workers) " +
			"and the leader decides and writes the plan. A host silent for about 3 heartbeats is gone and its share moves to the others."},
	{Name: "renew_sec", Type: "seconds", Default: "`ttl_sec` / 3", Limits: "`> 0`; 1.2 × `renew_sec` + `heartbeat_sec` under `ttl_sec` (its jitter, and the step that renews)",
		Doc: "How often the leader renews its lease (with jitter), so that two renewals can fail before it expires."},
	{Name: "hold_sec", Type: "seconds", Default: "2 × `ttl_sec`", Limits: "`> 0`",
		Doc: "How long a host holds its last target once the plan is stale (older than `ttl_sec`: the store unreachable, no leader) before it falls back " +
			"to its share of `min_workers`. Coordination failing never scales the fleet down, and a host that cannot reach the store never grows."},
}

// fleetConnKeys are the sources' connection keys, said of the store.
func fleetConnKeys() []KeyDoc {
	keys := slices.Clone(ConnKeys)
	keys[0].Doc = "The coordination store: `redis://`, `rediss://`, `postgres://` or `postgresql://`, without a password " +
		"(it goes to `password_file` or `password_credential`). Its scheme says which store it is."
	return keys
}

// inherited are keys of [fleet] as a pool's table sets them again: left
// out, they are [fleet]'s.
func inherited(keys []KeyDoc) []KeyDoc {
	keys = slices.Clone(keys)
	for i := range keys {
		keys[i].Default = "`[fleet]`'s"
	}
	return keys
}

var fleetKeys = TableDoc{
	Name:  "fleet",
	Title: "Fleets of hosts: `[fleet]`",
	Doc: "```toml\n" +
		"[fleet]\n" +
		"url = \"redis://queue.internal:6379/0\"\n" +
		"password_credential = \"fleet-redis\"\n" +
		"```\n" +
		"\n" +
		"The coordination store of the pools that join a fleet (a\n" +
		"`[pools.NAME.fleet]` table): many hosts run one pool on one queue, and one\n" +
		"leader, elected by a lease in the store, decides the fleet's number of\n" +
		"workers and splits it across the hosts. The store is the Redis or the\n" +
		"PostgreSQL the queue already lives in: `redis://`, `rediss://`,\n" +
		"`postgres://` or `postgresql://`, with the sources' connection keys and\n" +
		"checks (no password in the URL). A pool may name a store of its own in its\n" +
		"`[pools.NAME.fleet]`, so that `url` may be left out here; the table alone,\n" +
		"with no pool joining, does nothing. See [Fleets](fleet.md#configuration).",
	Keys: append(fleetConnKeys(),
		append([]KeyDoc{{Name: "host_id", Type: "string", Default: "the contents of `/etc/machine-id`",
			Limits: "1 to 64 of `A-Z a-z 0-9 . _ : -`",
			Doc: "This host's name in the fleet, unique among its hosts. Read only when a pool joins a fleet; a host " +
				"without a machine id (a container) must set it."}},
			fleetTimingDocs...)...),
}

var poolFleetKeys = TableDoc{
	Name:  "pools.NAME.fleet",
	Title: "Joining a fleet: `[pools.NAME.fleet]`",
	Doc: "```toml\n" +
		"[pools.email.fleet]\n" +
		"capacity = 8\n" +
		"```\n" +
		"\n" +
		"The pool joins a fleet: every host whose configuration has the pool with\n" +
		"this table shares one decision, taken by the leader on the queue's totals\n" +
		"and split across the live hosts in proportion to their capacity. The\n" +
		"table may be empty (`capacity = \"auto\"`). In a pool that joins,\n" +
		"`min_workers` and `max_workers` are the fleet's, not this host's.\n" +
		"\n" +
		"The store and timings are `[fleet]`'s, and any of its keys but `host_id`\n" +
		"may be set again here, for this pool alone. The connection keys go\n" +
		"together: one written here replaces `[fleet]`'s connection whole (the URL\n" +
		"and its password). The timings are checked on the values in effect, and a\n" +
		"problem names the key where it is set.",
	Keys: append(append([]KeyDoc{{Name: "capacity", Type: "integer or `\"auto\"`", Default: `"auto"`, Limits: "`>= 1`, or `\"auto\"`",
		Doc: "How many workers (groups, in a gang pool) this host holds for the pool: its weight in the split, and a cap " +
			"on its share. `\"auto\"` is what the host's capacity check fits (`[capacity]` and the pool's `[limits]`), " +
			"at most `max_workers`; a number above what fits is capped, with a warning. Above `max_workers` is fine: " +
			"the fleet's total is `max_workers` anyway."}},
		inherited(fleetConnKeys())...), inherited(fleetTimingDocs)...),
	Notes: "Refused in a pool that joins a fleet, because the leader decides for every\n" +
		"host and sees only its own machine: `target_cpu_utilisation`, and trigger\n" +
		"rules that read a host signal (`host_cpu`, `host_cpu_ema`, `psi_cpu`,\n" +
		"`psi_memory`, `mem_available`) or `worker_cpu`. The host guard still\n" +
		"protects each host on its own. Service pools and gang pools may join.",
}
