package config

var hostGuardKeys = TableDoc{
	Name: "host_guard",
	Doc: "Per host, shared by every pool. The daemon reads `/proc/stat` (busy share of\n" +
		"all cores since the last read), `/proc/pressure/cpu` and `memory` (`some\n" +
		"avg10`) and `/proc/meminfo` (`MemAvailable`) once per `sample_interval_sec`,\n" +
		"whichever pool's tick comes first. Host CPU is smoothed with an asymmetric\n" +
		"exponential average: `ema += alpha × (raw − ema)`, with `alpha_up` when the\n" +
		"reading is above the average and `alpha_down` when below (quick to believe a\n" +
		"rise, slow to believe a fall). A kernel without PSI (`psi=0`) is said once in\n" +
		"the journal; the PSI guards then judge nothing.",
	Keys: []KeyDoc{
		{Name: "host_cpu_scale_up_max", Type: "number", Default: "0.65", Limits: "in `(0, 1]`",
			Doc: "No pool scales up while the average **or** the raw reading is at or above it."},
		{Name: "host_cpu_emergency", Type: "number", Default: "0.88", Limits: "in `(0, 1]`, `>= host_cpu_scale_up_max`",
			Doc: "Above it (`max(ema, raw)`), an **emergency**: one worker is drained per `emergency_cooldown_sec`, across all pools, never below a pool's `min_workers`."},
		{Name: "alpha_up", Type: "number", Default: "0.5", Limits: "in `(0, 1]`",
			Doc: "The average's weights for a rising and a falling reading."},
		{Name: "alpha_down", Type: "number", Default: "0.1", Limits: "in `(0, 1]`",
			Doc: "The average's weights for a rising and a falling reading."},
		{Name: "emergency_cooldown_sec", Type: "seconds", Default: "90", Limits: "`>= 0`",
			Doc: "Time between two emergency scale-downs."},
		{Name: "sample_interval_sec", Type: "seconds", Default: "`[daemon] poll_interval_sec`", Limits: "`>= 0.1`",
			Doc: "How often the host is read."},
		{Name: "psi_cpu_max", Type: "number", Default: "unset: off", Limits: "in `(0, 100]`",
			Doc: "No scale-up while `some avg10` is at or above it."},
		{Name: "psi_memory_max", Type: "number", Default: "unset: off", Limits: "in `(0, 100]`",
			Doc: "No scale-up while `some avg10` is at or above it."},
		{Name: "psi_cpu_emergency", Type: "number", Default: "unset: off", Limits: "in `(0, 100]`, `>=` the `_max`",
			Doc: "An emergency above it."},
		{Name: "psi_memory_emergency", Type: "number", Default: "unset: off", Limits: "in `(0, 100]`, `>=` the `_max`",
			Doc: "An emergency above it."},
		{Name: "mem_available_min", Type: "size", Default: "unset: off", Limits: "bytes, or `\"512M\"` (K, M, G, T: base 1024)",
			Doc: "No scale-up while `MemAvailable` is below it."},
		{Name: "mem_available_emergency", Type: "size", Default: "unset: off", Limits: "`<= mem_available_min`",
			Doc: "An emergency below it."},
	},
	Notes: "A held scale-up keeps the pool where it is, except that a pool below its\n" +
		"`min_workers` still gets there: that is its baseline whatever the host. In an\n" +
		"emergency the worker comes from the pool with the lowest `priority` (a key of\n" +
		"`[pools.NAME]`, integer, default `0`); among equals, from the pool with the\n" +
		"most workers above its minimum. A pool already scaling down by more goes its\n" +
		"own way. An emergency drains even while the pool's source is failing: the\n" +
		"host is what fails then, not the queue. Each block (once per new target) and each emergency is in the\n" +
		"journal with the readings. The daemon's unit mounts all of `/proc`\n" +
		"(`ProcSubset=all`) for these files; `ProtectProc=invisible` still hides\n" +
		"other processes.",
}
