package config

// The keys of service pools (issue 19). service_load.go reads the tables
// under [pools.NAME.service] by these key lists, so that a key documented
// here is a key the loader takes.

var poolServiceKey = TableDoc{
	Name:  "pools.NAME",
	Title: "Service pools",
	Doc: "A pool with a `[pools.NAME.service]` table is a pool of **replicas that serve\n" +
		"traffic** rather than of queue workers: each replica gets its own ports, is\n" +
		"admitted by a readiness check, and the ready ones are published to discovery\n" +
		"files for a load balancer and for Prometheus. `min_workers` and\n" +
		"`max_workers` then count replicas (gang groups, with `group_size`).",
	Keys: []KeyDoc{
		{Name: "service", Type: "table", Default: "none: a pool of queue workers", Limits: "",
			Doc: "The [service](#poolsnameservice) table, `[pools.NAME.service]`; an empty table is a service pool with every default."},
	},
}

var serviceKeys = TableDoc{
	Name: "pools.NAME.service",
	Doc: "```toml\n" +
		"[pools.web]\n" +
		"exec = [\"/usr/local/bin/web\", \"--port=${FLEXIQ_PORT_HTTP}\"]\n" +
		"min_workers = 2\n" +
		"max_workers = 8\n" +
		"\n" +
		"[pools.web.service]\n" +
		"metrics_port = \"metrics\"         # scraped through web.file_sd.json\n" +
		"drain_period_sec = 30\n" +
		"\n" +
		"[pools.web.service.ports]\n" +
		"http = 8001                       # slot N gets 8000 + N\n" +
		"metrics = \"auto\"                  # a free port per replica\n" +
		"\n" +
		"[pools.web.service.readiness]\n" +
		"type = \"http\"\n" +
		"path = \"/health\"\n" +
		"port = \"http\"\n" +
		"\n" +
		"[[pools.web.service.template]]\n" +
		"source = \"/etc/flexiq-scaled/web-upstream.tmpl\"\n" +
		"destination = \"/etc/nginx/conf.d/web-upstream.conf\"\n" +
		"after_change = [\"/usr/bin/systemctl\", \"reload\", \"nginx\"]\n" +
		"```\n" +
		"\n" +
		"Each replica sees its ports as `FLEXIQ_PORT_<NAME>` (`FLEXIQ_PORT_HTTP`), which\n" +
		"`exec` can use through systemd's `${VAR}` expansion; the ranks of a gang group\n" +
		"also see `FLEXIQ_RANK`, `FLEXIQ_GROUP_SIZE` and `FLEXIQ_PEERS_<NAME>`. These\n" +
		"names are reserved: a service pool's `environment` must not set them.",
	Keys: []KeyDoc{
		{Name: "address", Type: "string", Default: "\"127.0.0.1\"", Limits: "an IPv4 or IPv6 address, without a zone; not `0.0.0.0`, `::` or a multicast address",
			Doc: "The address written to discovery for every replica: the one a proxy reaches them at. Set it when the proxy runs on another host or in another network namespace."},
		{Name: "metrics_port", Type: "string", Default: "unset: no file_sd file", Limits: "a port declared in `[pools.NAME.service.ports]`",
			Doc: "The port Prometheus scrapes: with it, the daemon writes `POOL.file_sd.json` in `discovery_dir`, one target per ready replica (rank 0 of a group) labelled `flexiq_pool` and `flexiq_slot`."},
		{Name: "discovery_dir", Type: "string", Default: "\"/run/flexiq-scaled/discovery\"", Limits: "an absolute path outside `/tmp`, `/var/tmp`, `/home`, `/root` and `/run/user` (the daemon's sandbox hides them)",
			Doc: "Where `POOL.json` (the ready replicas) and `POOL.file_sd.json` are written, atomically and only when their content changes."},
		{Name: "drain_period_sec", Type: "seconds", Default: "30", Limits: "`>= 0`",
			Doc: "How long a leaving replica keeps running after it has left every discovery file and the after-change commands have run, before it is stopped (`drain_signal`, then SIGKILL after `drain_timeout_sec`). `0` stops it at once, and in-flight requests may fail."},
		{Name: "ready_timeout_sec", Type: "seconds", Default: "300", Limits: "`> 0`",
			Doc: "A replica (every rank of a group) not ready this long after its start is stopped and replaced, with backoff."},
		{Name: "unready_timeout_sec", Type: "seconds", Default: "60", Limits: "`> 0`",
			Doc: "A replica that was ready and has been failing its probe this long is stopped and replaced. Meanwhile it is out of discovery."},
		{Name: "group_size", Type: "integer", Default: "1", Limits: "`>= 1`; with `[capacity] max_total_workers`, at most it, and `min_workers × group_size` at most it too",
			Doc: "Ranks per replica: each replica is a gang group of this many units (`flexiq-POOL@SLOT-rR.service` for ranks R > 0) that start together and stop together. `min_workers` and `max_workers` count groups."},
		{Name: "cpuset_split", Type: "boolean", Default: "false", Limits: "`true` needs `group_size >= 2`",
			Doc: "Split the CPUs the pool may use across a group's ranks (`AllowedCPUs=`), so that no two ranks of a group share a core. It needs the cgroup2 cpuset controller: on a host without it, loading the file warns, and the ranks share the CPUs."},
		{Name: "ports", Type: "table", Default: "none", Limits: "",
			Doc: "The replicas' [named ports](#poolsnameserviceports)."},
		{Name: "readiness", Type: "table", Default: "`type = \"active\"`", Limits: "",
			Doc: "When a replica is [ready](#poolsnameservicereadiness) to serve."},
		{Name: "template", Type: "array of tables", Default: "none", Limits: "",
			Doc: "Files rendered from the ready replicas, [`[[pools.NAME.service.template]]`](#poolsnameservicetemplate)."},
		{Name: "wake", Type: "table", Default: "none", Limits: "",
			Doc: "The pool's [wake address](#poolsnameservicewake), where requests that find it at zero replicas wake it."},
	},
}

var servicePortsKeys = TableDoc{
	Name: "pools.NAME.service.ports",
	Doc: "One key per port, its name the key: `http = 8001`, `metrics = \"auto\"`, or a\n" +
		"table for a port that systemd binds: `http = { port = 8001, socket = true }`.\n" +
		"A name matches `[a-z][a-z0-9_]{0,31}`; the replica sees the port as\n" +
		"`FLEXIQ_PORT_<NAME>`, upper-cased.",
	Keys: []KeyDoc{
		{Name: "NAME", Type: "string, integer or table", Limits: "`\"auto\"`, or a base from 1 to 65535 whose fixed range ends at 65535 at most; or a [table](#poolsnameserviceportsname) with `port` and `socket`",
			Doc: "`\"auto\"`: the daemon picks a free port for each replica (and each rank) at its start. A number is a base: slot N, rank R gets `base + (N-1) × group_size + R`, so the pool's fixed range is `base` to `base + max_workers × group_size - 1`. Two fixed ranges that overlap, in one pool or in two, are refused, naming both. A replica keeps its ports for its life, across daemon restarts."},
	},
}

var servicePortKeys = TableDoc{
	Name: "pools.NAME.service.ports.NAME",
	Doc: "A port written as a table, `http = { port = \"auto\", socket = true }` or\n" +
		"`[pools.web.service.ports.http]`: the port itself, and whether systemd binds\n" +
		"it for the replica ([socket activation](services.md#ports-that-systemd-binds)).",
	Keys: []KeyDoc{
		{Name: "port", Type: "string or integer", Required: true, Limits: "as a port's `NAME` above: `\"auto\"` or a base",
			Doc: "The port, as the plain form writes it."},
		{Name: "socket", Type: "boolean", Default: "false", Limits: "`true` for one port per pool at most, and only with `group_size = 1`",
			Doc: "systemd binds the port (as root: a port below 1024 works for any `user`) in a socket unit `flexiq-POOL@SLOT.socket` started in one transaction with the replica's service, and passes it to the replica as file descriptor 3 (`LISTEN_FDS=1`, `LISTEN_FDNAMES=NAME`); the replica binds nothing and must take the passed socket (`FLEXIQ_PORT_<NAME>` still names the port). No other program can take the port between its pick and the replica's start, and it survives a restart of the daemon. A replica's stop closes systemd's copy first, so the port refuses connections as soon as the replica closes its own."},
	},
}

var readinessKeys = TableDoc{
	Name: "pools.NAME.service.readiness",
	Doc: "When a replica is ready to serve, and so listed in discovery. A key that\n" +
		"does not apply to the `type` is refused.",
	Keys: []KeyDoc{
		{Name: "type", Type: "string", Default: "\"active\"", Limits: readinessKindNames("`%q`"),
			Doc: "`\"active\"`: ready once systemd says the unit is active (it started). `\"notify\"`: the workers run as `Type=notify` and are ready once they send `READY=1` (`sd_notify`). `\"http\"`, `\"tcp\"`, `\"command\"`: a probe, run by the daemon on every replica with Kubernetes' semantics (below)."},
		{Name: "path", Type: "string", Default: "\"/\"", Limits: "starts with `/`; no spaces, control characters or fragment; only for `\"http\"`",
			Doc: "The path (and query) the HTTP probe GETs; a 2xx or 3xx answer passes."},
		{Name: "port", Type: "string", Limits: "a port declared in `[pools.NAME.service.ports]`; required for `\"http\"` and `\"tcp\"`, only for them",
			Doc: "The port the probe connects to, by name."},
		{Name: "command", Type: "array of strings", Limits: "the command (first element) an absolute path; required for `\"command\"`, only for it",
			Doc: "The probe's command line, without a shell: exit status 0 passes. It runs in a transient unit of its own with the daemon's sandbox, as `user` below, with the replica's `FLEXIQ_PORT_<NAME>` variables."},
		{Name: "user", Type: "string", Default: "the pool's `user`", Limits: "a user name or uid that exists (looked up through NSS, as the pool's `user`); only for `\"command\"`",
			Doc: "The user the command probe runs as (`User=` of its unit). Unset, it runs as the workers do, with the pool's `user` and `group`; another user runs it in that user's primary group. `\"root\"` (or `\"0\"`) runs it as the daemon does, as root, which draws a warning when the workers run as another user. Under `run --user`, without a `user` in the pool, it runs as the daemon's own user."},
	},
}

var probeTimingKeys = TableDoc{
	Name:  "pools.NAME.service.readiness",
	Title: "Probe timing",
	Doc:   "For `\"http\"`, `\"tcp\"` and `\"command\"` only, with Kubernetes' names and defaults.",
	Keys: []KeyDoc{
		{Name: "initial_delay_sec", Type: "seconds", Default: "0", Limits: "in `[0, 86400]`",
			Doc: "No probe before this long after the replica starts."},
		{Name: "period_sec", Type: "seconds", Default: "10", Limits: "in `[1, 3600]`; above `timeout_sec`",
			Doc: "Between the starts of two probes of one replica."},
		{Name: "timeout_sec", Type: "seconds", Default: "1", Limits: "`>= 0.1`; at most `period_sec`",
			Doc: "A probe that takes longer failed."},
		{Name: "success_threshold", Type: "integer", Default: "1", Limits: "in `[1, 1000]`",
			Doc: "Passes in a row that make a replica ready."},
		{Name: "failure_threshold", Type: "integer", Default: "3", Limits: "in `[1, 1000]`",
			Doc: "Failures in a row that make a ready replica not ready: it leaves discovery until it passes again, and is replaced after `unready_timeout_sec`."},
	},
}

var templateKeys = TableDoc{
	Name: "pools.NAME.service.template",
	Doc: "Each `[[pools.NAME.service.template]]` is a Go\n" +
		"[text/template](https://pkg.go.dev/text/template) file rendered from the pool's\n" +
		"ready replicas on every change, written atomically and only when its content\n" +
		"changed. It sees `.Pool`, `.Replicas`, `.Leaders` (rank 0 of each group) and\n" +
		"`.Wake` (the pool's [wake address](#poolsnameservicewake), `\"\"` without one), each\n" +
		"replica with `.Slot`, `.Unit`, `.Address`, `.Ports`, `.Rank` and the methods\n" +
		"`.HostPort \"NAME\"` and `.Port \"NAME\"`, and the functions `join SEP LIST` and\n" +
		"`hostports NAME REPLICAS`. An nginx upstream:\n" +
		"\n" +
		"```\n" +
		"upstream web {\n" +
		"{{- range .Leaders}}\n" +
		"    server {{.HostPort \"http\"}};\n" +
		"{{- else}}\n" +
		"    server 127.0.0.1:9 down;\n" +
		"{{- end}}\n" +
		"}\n" +
		"```\n" +
		"\n" +
		"The template is parsed, and executed once on a sample replica with the pool's\n" +
		"ports, when the file is loaded: a template that does not parse, or names a\n" +
		"port the pool does not declare, is an error naming the config file, the key,\n" +
		"and the template's file and line; a reload then keeps the old configuration.",
	Keys: []KeyDoc{
		{Name: "source", Type: "string", Required: true, Limits: "an absolute path",
			Doc: "The template file, read when the configuration is loaded (and reloaded). The daemon reads it in its sandbox, which hides `/tmp`, `/var/tmp`, `/home`, `/root` and `/run/user`: keep it elsewhere, e.g. in `/etc/flexiq-scaled`."},
		{Name: "destination", Type: "string", Required: true, Limits: "an absolute path outside the directories the daemon's sandbox hides; its directory must exist; not another template's or another pool's output, nor the pool's own discovery file",
			Doc: "The file rendered."},
		{Name: "mode", Type: "string", Default: "\"0644\"", Limits: "permissions in octal, as a string of 3 or 4 digits, not `\"0000\"`",
			Doc: "The rendered file's mode. A string, so that `644` cannot be read as a decimal number."},
		{Name: "after_change", Type: "array of strings", Default: "none", Limits: "the command (first element) an absolute path",
			Doc: "A command run after the rendered file changed, without a shell, as a transient unit; its output goes to the journal, and a failure is logged as a warning and retried at the next change. A replica leaving discovery starts its drain period only once it has run."},
		{Name: "after_change_timeout_sec", Type: "seconds", Default: "30", Limits: "`> 0`; only with `after_change`",
			Doc: "How long `after_change` may run."},
	},
}

var wakeKeys = TableDoc{
	Name: "pools.NAME.service.wake",
	Doc: "The pool's **wake address**, for a pool that idles at `min_workers = 0`: systemd\n" +
		"listens there (a socket unit `flexiq-POOL-wake.socket`, which survives daemon\n" +
		"restarts), and a template's `.Wake` names it, so that the load balancer sends\n" +
		"there while the pool has no ready replica. A connection arriving wakes the\n" +
		"pool at once (0 → 1) and is held until the first replica is ready, then\n" +
		"forwarded to it byte for byte (plain TCP: HTTP, gRPC, anything), as is every\n" +
		"connection that arrives meanwhile. See [services](services.md#waking-a-pool-at-zero).\n" +
		"\n" +
		"```toml\n" +
		"[pools.web.service.wake]\n" +
		"listen = \"127.0.0.1:18080\"\n" +
		"hold_timeout_sec = 60\n" +
		"```\n" +
		"\n" +
		"A wake address on a pool whose `min_workers` is above 0 draws a warning (it\n" +
		"takes requests only while every replica is down); a `[pools.NAME.wake]` table\n" +
		"outside the service table is an error.",
	Keys: []KeyDoc{
		{Name: "listen", Type: "string", Required: true, Limits: "an IP address and a port other than 0, as `\"127.0.0.1:18080\"` or `\"[::1]:18080\"`; not a port of another pool's wake address nor in a fixed replica range (any pool's)",
			Doc: "Where systemd listens for the pool's cold requests."},
		{Name: "port", Type: "string", Default: "the pool's only port", Limits: "a port declared in `[pools.NAME.service.ports]`; required when the pool declares several",
			Doc: "The replicas' port that held connections are forwarded to."},
		{Name: "mode", Type: "string", Default: "\"hold\"", Limits: "`\"hold\"` or `\"reject\"`",
			Doc: "`\"hold\"`: a connection is held until a replica is ready, then forwarded. `\"reject\"`: an HTTP/1.x request is answered `503` with `Retry-After` at once (any other protocol is closed), while the pool wakes, for clients that prefer to retry."},
		{Name: "hold_timeout_sec", Type: "seconds", Default: "60", Limits: "`> 0`",
			Doc: "How long a connection is held at most: past it, an HTTP/1.x request gets `503` with `Retry-After`, and any other protocol is closed. A proxy in front must wait longer than this for an answer (nginx's `proxy_read_timeout`)."},
	},
}
