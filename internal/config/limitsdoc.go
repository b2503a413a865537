package config

var limitsKeys = TableDoc{
	Name: "pools.NAME.limits",
	Doc: "Optional resource limits set on **each worker's** unit. All are unset by\n" +
		"default. For a budget shared by all workers of a pool, use a slice drop-in\n" +
		"(below).",
	Keys: []KeyDoc{
		{Name: "cpu_quota", Type: "string", Limits: "a percentage above 0, such as `\"50%\"` or `\"200%\"`",
			Doc: "The worker's `CPUQuota=`: `100%` is one CPU."},
		{Name: "memory_max", Type: "string or integer", Limits: "a byte count above 0, optionally with a `K`, `M`, `G` or `T` suffix (base 1024, decimals allowed: `\"1.5G\"`), or `\"infinity\"`",
			Doc: "The worker's `MemoryMax=`."},
		{Name: "tasks_max", Type: "integer", Limits: "`>= 1`",
			Doc: "The worker's `TasksMax=` (processes and threads)."},
	},
	Notes: "`cpu_quota` and `memory_max` also say how many of the pool's workers fit on\n" +
		"the host: see [`[capacity]`](#capacity).",
}
