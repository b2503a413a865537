package config

var poolIntro = TableDoc{
	Name: "pools.NAME",
	Doc: "`NAME` must match `[a-z0-9_]{1,32}`. It becomes part of unit names, and in\n" +
		"particular must not contain `-`, which systemd reads as slice nesting, nor\n" +
		"`@`, `/`, `.`, white space or anything outside ASCII. Any other name is\n" +
		"refused when the file is loaded, so it never reaches a unit name.",
	Keys: []KeyDoc{},
}

var poolWorkerKeys = TableDoc{
	Name:  "pools.NAME",
	Title: "The worker",
	Keys: []KeyDoc{
		{Name: "app", Type: "string", Limits: "not empty; not together with `exec`",
			Doc: "Shortcut for `exec = [\"flexiq\", \"worker\", \"--app\", APP]`. The bare `flexiq` is looked up in systemd's fixed search path (below), so for a virtualenv install write `exec` with the absolute path instead."},
		{Name: "exec", Type: "array of strings", Limits: "not empty; the command (first element) an absolute path or a plain file name; not together with `app`",
			Doc: "The worker's command line, as argv (no shell), with systemd's `$` expansion (below). One of `app` and `exec` is required."},
		{Name: "user", Type: "string", Default: "\"flexiq\"", Limits: "a name or numeric ID that exists through NSS; not empty, `.`, `..`, nor with `:`, `/`, control characters or white space at either end (systemd refuses those)",
			Doc: "User the workers run as. A pool runs as `root` only if it is written out (it is never a default), and that draws a warning: `user = \"root\"`, `\"0\"`, or any name that resolves to uid 0 through NSS. A `group` of gid 0 (`\"root\"`, `\"0\"`, or a name that resolves to it), or an unset group when the user's primary group is gid 0, is warned about likewise."},
		{Name: "group", Type: "string", Default: "unset: the user's primary group", Limits: "as `user`",
			Doc: "Group the workers run as. Unset, systemd uses the user's primary group, whatever its name (`user = \"nobody\"` runs as `nobody:nogroup`)."},
		{Name: "working_directory", Type: "string", Default: "unset (systemd's default)", Limits: "absolute path",
			Doc: "Working directory of the workers."},
		{Name: "environment", Type: "table of strings", Default: "none", Limits: "names match `[A-Za-z_][A-Za-z0-9_]*`; `FLEXIQ_SCALED_POOL` and `FLEXIQ_SCALED_SLOT` are reserved",
			Doc: "Extra environment variables for the workers, e.g. `environment = { PYTHONUNBUFFERED = \"1\" }`. Keep credentials out of it: use `environment_file`."},
		{Name: "environment_file", Type: "string or array of strings", Default: "none", Limits: "absolute paths, each optionally after a `-`",
			Doc: "Files of `NAME=value` lines for the workers' environment: the worker units' `EnvironmentFile=`. systemd reads them as root at each start, so they can be `0600 root`; a missing file fails the start, unless its path starts with `-` (`\"-/etc/myapp/local.env\"`). A variable set both in a file and in `environment` takes the file's value, as systemd gives `EnvironmentFile=` precedence over `Environment=`."},
		{Name: "hardening", Type: "string", Default: "\"default\"", Limits: "`\"none\"`, `\"default\"` or `\"strict\"`",
			Doc: "The sandboxing preset of the worker units; see [Worker hardening](workers.md#worker-hardening) for what each sets."},
		{Name: "max_surge", Type: "integer", Default: "1", Limits: "`>= 1`",
			Doc: "How many workers a rollout (below) may start above the current count."},
		{Name: "mode", Type: "string", Default: "\"active\"", Limits: "`\"active\"`, `\"dry-run\"`",
			Doc: "`\"dry-run\"`: the pool decides and logs what it would do (\"would scale 3 → 7\"), and never starts, stops or resets a unit (see \"The operator's commands\")."},
	},
	Notes: "**The command.** systemd, not a shell, runs `exec`. A command that is not an\n" +
		"absolute path is looked up in systemd's fixed search path,\n" +
		"`/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`\n" +
		"(`systemd-path search-binaries-default`); the `PATH` in `environment` is not\n" +
		"used for that, and a command with a `/` that is not absolute is refused.\n" +
		"`check-config` resolves the command the same way and says when it is not\n" +
		"there, naming what it found through the pool's `PATH`:\n" +
		"\n" +
		"```\n" +
		"/etc/flexiq-scaled/config.toml: pools.email.app: \"flexiq\" is not an absolute path, so systemd looks it up in its fixed search path (...), and it is not there; systemd would fail every worker start with status=203/EXEC: found at /opt/venv/bin/flexiq via the pool's environment PATH, which systemd does not use: write exec = [\"/opt/venv/bin/flexiq\", \"worker\", \"--app\", \"myapp.tasks:queue\"] instead of app\n" +
		"```\n" +
		"\n" +
		"**`$` in `exec`.** systemd expands environment variables in the arguments\n" +
		"(not in the command itself), from `environment`, `environment_file` and the\n" +
		"variables it sets: `${NAME}`, anywhere in an argument, becomes the value, and the\n" +
		"argument stays one argument; `$NAME` is expanded only as an argument of its\n" +
		"own, into the value split at white space (zero or more arguments), and is\n" +
		"kept as written inside a longer argument (`\"--db=$DB\"` stays so). An unset\n" +
		"variable is empty. Write `$$` for a literal `$`: `exec = [\"/usr/bin/app\", \"--price=5$$\"]`\n" +
		"passes `--price=5$`. A `$` followed by anything but a name, `{` or `$` is kept\n" +
		"as it is.\n" +
		"\n" +
		"**Rollouts.** When a reload changes what the workers run (`exec` or `app`,\n" +
		"`user`, `group`, `environment`, `environment_file`, `working_directory`,\n" +
		"`drain_signal`, `hardening`, `limits`, `requires`, `start_condition`), the running workers are replaced, as a\n" +
		"Deployment rollout does: new ones are started and active before old ones are\n" +
		"drained, at most `max_surge` above the current count at a time, so capacity\n" +
		"never dips.",
}

var poolScalingKeys = TableDoc{
	Name:  "pools.NAME",
	Title: "Scaling",
	Keys: []KeyDoc{
		{Name: "min_workers", Type: "integer", Default: "1", Limits: "`>= 0`",
			Doc: "The pool never has fewer live workers. `0` lets an idle pool scale to zero."},
		{Name: "max_workers", Type: "integer", Default: "10", Limits: "`>= 1` and `>= min_workers`",
			Doc: "The pool never has more live workers."},
		{Name: "target_queue_depth_per_worker", Type: "number", Default: "15", Limits: "`>= 1`",
			Doc: "Pending (ready-to-run) jobs one worker should have waiting for it. The backlog signal asks for `ceil(pending / target_queue_depth_per_worker)` workers."},
		{Name: "target_utilisation", Type: "number", Default: "0.75", Limits: "in `(0, 1]`",
			Doc: "Fraction of the workers' threads that should be busy. The busy signal asks for `ceil(running / threads_per_worker / target_utilisation)` workers."},
		{Name: "threads_per_worker", Type: "integer", Default: "4", Limits: "`>= 1`",
			Doc: "Jobs one worker runs at once; must match the worker's own setting. More running jobs than `current × threads_per_worker` is overload. `\"auto\"` (flexiq sources only) reads it from flexiq's own workers; see below."},
		{Name: "threads_per_worker_fallback", Type: "integer", Default: "4", Limits: "`>= 1`; only with `threads_per_worker = \"auto\"`",
			Doc: "What `\"auto\"` uses while no live flexiq worker says."},
		{Name: "target_cpu_utilisation", Type: "number", Default: "unset: the CPU signal is off", Limits: "in `(0, 1]`",
			Doc: "Target mean CPU use of the workers, as a fraction of `cpu_per_worker`. When set, the CPU signal asks for `ceil(current × U / target_cpu_utilisation)` workers."},
		{Name: "target_queue_latency_sec", Type: "seconds", Default: "unset: the latency signal is off", Limits: "`> 0`",
			Doc: "How long the oldest ready job should wait at most. When set and the source knows that job's age `A`, the latency signal asks for `ceil(current × A / target_queue_latency_sec)` workers, and at least 1 when `A > 0` and no worker runs. The signal HireFire and Judoscale scale on: it sees a queue that is short but slow."},
		{Name: "cpu_per_worker", Type: "number", Default: "1.0", Limits: "`> 0`",
			Doc: "CPUs one worker is expected to use at full load. `U`, a worker's utilisation, is its cgroup's CPU time over the last tick divided by the tick's wall time and by `cpu_per_worker`. A pool whose policy does not use it (no `target_cpu_utilisation`, no rules) samples it every 30 s instead, for choosing the idlest workers to stop first and for `status`: at 500 workers that spares 500 cgroup reads on most ticks."},
		{Name: "tolerance", Type: "number", Default: "0.1", Limits: "in `[0, 1)`",
			Doc: "A recommendation within this relative distance of the current size is ignored, to avoid flapping."},
		{Name: "scale_up_window_sec", Type: "seconds", Default: "0", Limits: "`>= 0`",
			Doc: "The pool scales up only as far as every recommendation within this window agrees. `0`: up at once."},
		{Name: "scale_down_window_sec", Type: "seconds", Default: "300", Limits: "`>= 0`",
			Doc: "The pool scales down only as far as every recommendation within this window agrees."},
		{Name: "demand", Type: "string", Default: "\"none\"", Limits: "`\"none\"` or `\"littles-law\"`; `\"littles-law\"` needs a `flexiq-sqlite` source",
			Doc: "An opt-in demand signal. `\"littles-law\"`: the source reads the arrival rate `λ` (jobs created per second) and the mean service time `W` (`completed_at - started_at` of the jobs finished) over `demand_window_sec`, and the signal asks for `ceil(λ × W / threads_per_worker / target_utilisation)` workers, the busy threads Little's law predicts; it sits out while no job has finished in the window. It remembers the recent load, so it pairs with a short or no `scale_down_window_sec`: see [docs/simulate.md](simulate.md). Each read scans the jobs table."},
		{Name: "demand_window_sec", Type: "seconds", Default: "60", Limits: "`>= 1`; only with `demand = \"littles-law\"`",
			Doc: "The window of the Little's law signal."},
		{Name: "onset_min_jobs", Type: "integer", Default: "0", Limits: "`0` (off), or `>= 2` with `demand = \"littles-law\"`",
			Doc: "The burst-onset signal: when at least this many jobs are waiting (with the running ones too when every thread is busy), it asks for `ceil(n / oldest_age × W / threads_per_worker / target_utilisation)` workers, the rate the jobs arrived at (the oldest one's age, at least 0.5 s) times the last mean service time `W` the Little's law signal observed, remembered across the silences its window forgets. It sees a burst at the first tick after it starts. The source must report the oldest job's age."},
		{Name: "keep_warm_workers", Type: "integer", Default: "0", Limits: "`0` (off) to `max_workers`; needs `keep_warm_sec`",
			Doc: "A floor under scale-downs: for `keep_warm_sec` after the last tick that saw work (a job waiting, or arrivals in the demand window; running jobs do not count), the pool does not go below this many workers. It never starts a worker."},
		{Name: "keep_warm_sec", Type: "seconds", Default: "0", Limits: "`>= 0`; above 0 when, and only when, `keep_warm_workers` is",
			Doc: "How long the keep-warm floor holds after the last work."},
		{Name: "poll_interval_sec", Type: "seconds", Default: "`[daemon] poll_interval_sec`", Limits: "`>= 0.1`",
			Doc: "This pool's tick."},
	},
}

var poolDrainKeys = TableDoc{
	Name:  "pools.NAME",
	Title: "Draining",
	Keys: []KeyDoc{
		{Name: "drain_signal", Type: "string", Default: "\"SIGTERM\"", Limits: "a known signal; case-insensitive, `SIG` optional (`\"term\"`, `\"SIGINT\"`, `\"USR1\"`); not `SIGKILL` or `SIGSTOP`",
			Doc: "Signal a worker gets when it is stopped (scale-down, pool removed, daemon stopped): the worker should finish its current jobs, claim no new ones, and exit. It is the worker unit's `KillSignal=`."},
		{Name: "drain_timeout_sec", Type: "seconds", Default: "30", Limits: "`>= 0`",
			Doc: "How long a stopping worker may take before systemd SIGKILLs it; the worker unit's `TimeoutStopSec=`. `0` means no limit (`TimeoutStopSec=infinity`: systemd never kills a worker that does not exit, rather than applying its 90 s default), and draws a warning."},
		{Name: "quiet_signal", Type: "string", Default: "unset: one-phase drain", Limits: "a known signal, as `drain_signal`; not the drain signal itself; needs `quiet_period_sec`",
			Doc: "Two-phase drain: at scale-down the worker's main process first gets this signal (Sidekiq's `\"TSTP\"`: take no new work, finish what is in hand), and the stop follows `quiet_period_sec` later."},
		{Name: "quiet_period_sec", Type: "seconds", Default: "unset", Limits: "`> 0`; needs `quiet_signal`",
			Doc: "How long a quieted worker keeps running before its stop (`drain_signal`, then SIGKILL after `drain_timeout_sec`)."},
	},
	Notes: "**Two-phase drain.** With `quiet_signal`, a scale-down sends it to the\n" +
		"chosen worker's main process only (`systemctl kill --kill-whom=main`), and the\n" +
		"worker stops counting as current at once: it is draining (a `draining`\n" +
		"event, `FLEXIQ_REASON` saying `quiet phase`). `quiet_period_sec` later the\n" +
		"daemon asks systemd for the ordinary stop (a `quiet phase over` event), and\n" +
		"the `stopped` event follows when the unit is gone. The quiet deadlines are\n" +
		"kept in the runtime directory (`/run/flexiq-scaled/quiet-POOL.json`): a\n" +
		"daemon restarted or killed during the quiet phase takes the worker back as\n" +
		"draining and stops it at the same deadline; a worker restarted meanwhile is\n" +
		"a new worker. Stopping the daemon, or removing the pool, stops quiet workers\n" +
		"at once. Only scale-downs have a quiet phase; rollouts and crash\n" +
		"replacement do not.",
}

var poolReadinessKeys = TableDoc{
	Name:  "pools.NAME",
	Title: "Readiness",
	Keys: []KeyDoc{
		{Name: "requires", Type: "array of strings", Default: "none", Limits: "unit names with their type (`\"postgresql.service\"`, `\"srv-shared.mount\"`); no worker units",
			Doc: "Units the workers need. Each worker unit gets `Requires=` and `After=` on them; while any is not active, starts are deferred."},
		{Name: "start_condition", Type: "string or array of strings", Default: "none", Limits: "a string is a shell command (run as `/bin/sh -c`); an array a command line whose command is an absolute path",
			Doc: "A readiness check that \"active\" does not capture (a shared volume not yet populated), run by systemd before each worker as its `ExecCondition=`, as the worker's user. Exit 0 starts the worker; 1–254 skips it; 255 or a crash fails the start."},
	},
	Notes: "**`requires`: `Requires=`, not `BindsTo=`.** Both stop (or restart) the workers\n" +
		"when a required unit is stopped (or restarted) on purpose, `systemctl stop\n" +
		"postgresql` for instance. `BindsTo=` would also stop them whenever the unit\n" +
		"leaves \"active\" on its own, a crash or an automatic restart included: every\n" +
		"flap of the database would kill the workers in the middle of their jobs,\n" +
		"without a drain. With `Requires=` running workers ride out a flap (their jobs\n" +
		"may fail and be retried by the queue), while the daemon holds new workers\n" +
		"back: each tick in which a start is wanted (scale-up, `min_workers`, a crash\n" +
		"replacement, a rollout) first reads the required units' state over D-Bus, and\n" +
		"while any is not `active` (or `reloading`), or has a stop queued, the starts\n" +
		"are deferred with a `scale-up-deferred` event (once per episode, not per tick)\n" +
		"and made once they are active. The daemon never starts a required unit\n" +
		"itself: starting a worker would pull it in through `Requires=`, so it waits.\n" +
		"\n" +
		"**`start_condition`.** A worker skipped by its condition is not a crash: no\n" +
		"backoff, no crash event, but a `condition-skip` event (once per episode) and\n" +
		"another try at the next poll interval, never faster, however often the\n" +
		"source wakes the pool. systemd unloads a skipped transient unit at once\n" +
		"(its `Result=exec-condition` is gone before it can be read), so a worker\n" +
		"with a condition that is inactive or gone right after its start job is taken\n" +
		"as skipped.\n" +
		"\n" +
		"When scaling down, the workers that used the least CPU over the last tick are\n" +
		"stopped first (ties: the highest slot). A draining worker no longer counts as\n" +
		"current.\n" +
		"\n" +
		"Stopping `flexiq-scaled.service` drains every worker of every pool and waits\n" +
		"for them. It then lists every `flexiq-*@*.service` unit once more and stops\n" +
		"whatever still runs (a worker whose start job was still pending, or one\n" +
		"started during the stop, even of a pool that is not configured), until none\n" +
		"does, and resets failed ones. The service's `TimeoutStopSec=` (15 min as shipped) must exceed the\n" +
		"longest `drain_timeout_sec` of any pool plus a margin; raise it with a drop-in\n" +
		"(`systemctl edit flexiq-scaled`) if needed. A *restart* of the service leaves\n" +
		"the workers running, and the new daemon adopts them.",
}
