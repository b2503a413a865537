package config

// The policy keys of [pools.NAME] and the tables they lead to. rules.go
// checks the rule and behavior tables by these key lists, so that a key
// documented here is a key the loader takes.

var poolPolicyKeys = TableDoc{
	Name:  "pools.NAME",
	Title: "Policy",
	Doc: "The pool's place in the pipeline of [the scaling policy](policy.md#host-guard-trigger-rules-and-rate-limits):\n" +
		"HPA formula or trigger rules, then rate limits, then the host guard.",
	Keys: []KeyDoc{
		{Name: "policy", Type: "string", Default: "\"hpa\"", Limits: "`\"hpa\"` or `\"rules\"`",
			Doc: "`\"hpa\"`: the HPA formula of [the scaling policy](policy.md#the-scaling-policy). `\"rules\"`: the pool's `scale_up` and `scale_down` [trigger rules](#trigger-rules-policy--rules), of which it needs at least one."},
		{Name: "priority", Type: "integer", Default: "0", Limits: "an integer",
			Doc: "In a host guard emergency the worker to drain comes from the pool with the lowest `priority`; among equals, from the pool with the most workers above its minimum."},
		{Name: "scale_up", Type: "array of tables", Default: "none", Limits: "only with `policy = \"rules\"`",
			Doc: "The scale-up rules, `[[pools.NAME.scale_up]]`, tried in order; the first that holds acts. Their keys are under [trigger rules](#trigger-rules-policy--rules)."},
		{Name: "scale_down", Type: "table", Default: "none", Limits: "only with `policy = \"rules\"`",
			Doc: "The scale-down rule, `[pools.NAME.scale_down]`, tried when no scale-up rule acts."},
		{Name: "behavior", Type: "table", Default: "none: no rate limit", Limits: "",
			Doc: "[Rate limits and cooldowns](#rate-limits-and-cooldowns-poolsnamebehavior), `[pools.NAME.behavior]`."},
	},
}

var ruleKeys = TableDoc{
	Name:  "pools.NAME.scale_up",
	Title: "Trigger rules: `policy = \"rules\"`",
	Doc: "```toml\n" +
		"[pools.n8n]\n" +
		"policy = \"rules\"\n" +
		"\n" +
		"[[pools.n8n.scale_up]]          # tried in order; the first that holds acts\n" +
		"when = \"pending > 0 && host_cpu < 0.65 && host_cpu_ema < 0.65\"\n" +
		"step = 1                        # workers added (default 1)\n" +
		"cooldown_sec = 90               # since this rule last acted\n" +
		"\n" +
		"[pools.n8n.scale_down]          # one rule; tried when no scale-up rule acts\n" +
		"when = \"idle_sec >= 300\"\n" +
		"step = 1\n" +
		"cooldown_sec = 90\n" +
		"```\n" +
		"\n" +
		"`when` is an [expr-lang](https://expr-lang.org) expression that must be a\n" +
		"boolean. It is compiled and type-checked when the file is loaded; an error\n" +
		"names the file, the key (`pools.n8n.scale_up[0].when`) and the line and\n" +
		"column. It sees these names:\n" +
		"\n" +
		"| name | what |\n" +
		"|---|---|\n" +
		"| `pending`, `running`, `paused` | the source's counts (`running` as for the HPA formula, less what draining workers finish) |\n" +
		"| `oldest_age` | seconds the oldest ready job has waited |\n" +
		"| `workers`, `draining` | live workers; workers draining |\n" +
		"| `worker_cpu` | the workers' mean CPU use, a fraction of `cpu_per_worker` |\n" +
		"| `host_cpu`, `host_cpu_ema` | host CPU, raw and averaged (as the host guard reads it; also without a `[host_guard]`) |\n" +
		"| `psi_cpu`, `psi_memory` | `some avg10`, percent |\n" +
		"| `mem_available` | bytes |\n" +
		"| `idle_sec` | seconds since the source last had pending or running work (since the daemon started, if never) |\n" +
		"| `promql(\"QUERY\")` | an instant query against the pool's Prometheus: its source's server when the source is `type = \"prometheus\"`, else the daemon-level `[prometheus]`; any non-zero sample fires, an empty result does not, an error holds |\n" +
		"\n" +
		"A rule that reads a name whose value is not known on this tick (no PSI, no\n" +
		"oldest age, the first host reading), or whose query fails, **holds** the pool\n" +
		"for the tick, in both directions, with a rule-error entry in the journal.\n" +
		"`promql()` takes a string literal, so that its query is checked at load: every\n" +
		"range window (`rate(x[5m])`, and subqueries) must be at least twice the\n" +
		"server's `scrape_interval_sec`. Note that PromQL comparisons filter: `x == 0`\n" +
		"returns the sample `0` when `x` is 0, which does not fire; write `x == bool\n" +
		"0`. A rule's step is bounded by `min_workers` and `max_workers`; its cooldown\n" +
		"starts only when it actually changed the pool.",
	Keys: []KeyDoc{
		{Name: "when", Type: "string", Required: true, Limits: "an expr-lang expression of type boolean",
			Doc: "The condition under which the rule acts."},
		{Name: "cooldown_sec", Type: "seconds", Default: "0", Limits: "`>= 0`",
			Doc: "Time after this rule last acted during which it does not act again."},
		{Name: "step", Type: "integer", Default: "1", Limits: "`>= 1`",
			Doc: "Workers added (scale_up) or removed (scale_down) when the rule acts."},
	},
}

var behaviorKeys = TableDoc{
	Name:  "pools.NAME.behavior",
	Title: "Rate limits and cooldowns: `[pools.NAME.behavior]`",
	Doc: "```toml\n" +
		"[pools.render.behavior]\n" +
		"cooldown_sec = 90                    # after any scaling action, either way\n" +
		"\n" +
		"[pools.render.behavior.scale_up]\n" +
		"select = \"max\"                       # max (default) | min | disabled\n" +
		"cooldown_sec = 30                    # since the last scale-up\n" +
		"policies = [{ type = \"workers\", value = 4, period_sec = 15 },\n" +
		"            { type = \"percent\", value = 100, period_sec = 15 }]\n" +
		"\n" +
		"[pools.render.behavior.scale_down]\n" +
		"policies = [{ type = \"workers\", value = 1, period_sec = 60 }]\n" +
		"```\n" +
		"\n" +
		"The policies are the Kubernetes HPA's `behavior`: each allows, within its\n" +
		"period, `value` workers or `value` percent of the count at the start of the\n" +
		"period (the current count less what was added within the period plus what was\n" +
		"removed; a percentage rounds up when scaling up, down when scaling down).\n" +
		"`select = \"max\"` takes the policy that allows the most change, `min` the\n" +
		"least, `disabled` allows none in that direction. `min_workers` and\n" +
		"`max_workers` win over every limit. The scaling events are kept in the\n" +
		"pool's state file, so a restart of the daemon keeps its limits and\n" +
		"cooldowns (and the rules' cooldowns).",
	Keys: []KeyDoc{
		{Name: "cooldown_sec", Type: "seconds", Default: "0", Limits: "`>= 0`",
			Doc: "Time after any scaling action, either way, before the next."},
		{Name: "scale_up", Type: "table", Default: "none", Limits: "",
			Doc: "The limits on scaling up, `[pools.NAME.behavior.scale_up]`, with the keys below."},
		{Name: "scale_down", Type: "table", Default: "none", Limits: "",
			Doc: "The limits on scaling down, `[pools.NAME.behavior.scale_down]`, with the keys below."},
	},
}

var behaviorDirectionKeys = TableDoc{
	Name:  "pools.NAME.behavior",
	Title: "`[pools.NAME.behavior.scale_up]` and `[pools.NAME.behavior.scale_down]`",
	Doc:   "The two directions take the same keys.",
	Keys: []KeyDoc{
		{Name: "select", Type: "string", Default: "\"max\"", Limits: "`\"max\"`, `\"min\"` or `\"disabled\"`",
			Doc: "Which policy applies: the one that allows the most change, the least, or none in that direction."},
		{Name: "policies", Type: "array of tables", Default: "none", Limits: "each with the keys below",
			Doc: "The rate limits, as `[{ type = \"workers\", value = 4, period_sec = 15 }]`."},
		{Name: "cooldown_sec", Type: "seconds", Default: "0", Limits: "`>= 0`",
			Doc: "Time since the last scaling action in this direction before the next."},
	},
}

var behaviorPolicyKeys = TableDoc{
	Name:  "pools.NAME.behavior",
	Title: "Each of `policies`",
	Keys: []KeyDoc{
		{Name: "type", Type: "string", Required: true, Limits: "`\"workers\"` or `\"percent\"`",
			Doc: "Whether `value` counts workers or a percentage of the count at the start of the period."},
		{Name: "value", Type: "integer", Required: true, Limits: "`>= 1`",
			Doc: "The change allowed within the period."},
		{Name: "period_sec", Type: "seconds", Required: true, Limits: "`> 0`",
			Doc: "The period."},
	},
}
