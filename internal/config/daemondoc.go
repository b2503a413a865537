package config

var daemonKeys = TableDoc{
	Name: "daemon",
	Keys: []KeyDoc{
		{Name: "poll_interval_sec", Type: "seconds", Default: "5", Limits: "`>= 0.1`",
			Doc: "How often each pool is observed and re-sized, for pools that set no `poll_interval_sec` of their own."},
	},
	Notes: "The `[daemon]` table may be left out. A file with no pools is valid: the daemon\n" +
		"runs and starts no workers.\n" +
		"\n" +
		"The `[host_guard]` table, the per-pool keys `priority` and `policy`, the\n" +
		"`scale_up` and `scale_down` rules and `[pools.NAME.behavior]` are described in\n" +
		"[Host guard, trigger rules and rate limits](policy.md#host-guard-trigger-rules-and-rate-limits).",
}

var capacityKeys = TableDoc{
	Name: "capacity",
	Doc: "A budget for the workers of all pools together, on top of each pool's own\n" +
		"fit. Every key is optional; the table may be left out.",
	Keys: []KeyDoc{
		{Name: "max_total_workers", Type: "integer", Default: "unset: no cap", Limits: "`>= 1`",
			Doc: "Live and draining workers of all pools together."},
		{Name: "reserved_cores", Type: "number", Default: "0", Limits: "`>= 0`",
			Doc: "CPUs kept for the host itself: workers' `cpu_quota`s share what is left."},
		{Name: "reserved_memory", Type: "string or integer", Default: "unset: none kept", Limits: "a byte count, as `memory_max` (not `\"infinity\"`)",
			Doc: "Memory kept for the host itself: workers' `memory_max`es share what is left."},
	},
	Notes: "**How many fit.** A pool whose workers have `[limits]` `cpu_quota` and/or\n" +
		"`memory_max` fits `min(floor((CPUs − reserved_cores) / quota),\n" +
		"floor((RAM − reserved_memory) / memory_max))` workers on the host, cores and\n" +
		"memory floored independently (a limit that is not set bounds nothing), and\n" +
		"at most `max_total_workers`. CPUs are those the daemon may run on, RAM the\n" +
		"kernel's total (sysinfo(2)). A pool without either limit is bounded by\n" +
		"`max_total_workers` alone.\n" +
		"\n" +
		"- A `min_workers` that does not fit, or `min_workers` of all pools that do not\n" +
		"  fit together, is a configuration error naming the pool and the shortfall\n" +
		"  (`pools.render.min_workers: 5 workers do not fit on this host (4 cores,\n" +
		"  7.8 GiB): short of 1 cores (need 5, have 4)`): the daemon refuses to start\n" +
		"  or reload, and `check-config` fails.\n" +
		"- A `max_workers` above what fits is capped, with a warning from\n" +
		"  `check-config` and a `capacity-capped` journal event from the daemon.\n" +
		"- At run time the pools share one ledger of the budget: a start with no room\n" +
		"  left (other pools hold it) is skipped with a `capacity-exhausted` event,\n" +
		"  not left pending; the pool's target drops to what it has, and the policy\n" +
		"  asks again at the next tick. Draining workers count until systemd reports\n" +
		"  them gone, since they hold their memory until then. A rollout's\n" +
		"  replacements are not held to the budget: each replaces a worker that then\n" +
		"  drains, and `max_surge` bounds the overlap.",
}
