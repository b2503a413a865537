package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The prometheus and command source types: their keys, defaults and
// refusals.
func TestPrometheusAndCommandSources(t *testing.T) {
	const prom = "type = \"prometheus\"\nurl = \"http://127.0.0.1:9090\"\n"
	const pq = "pending_query = \"sum(queue_waiting)\"\n"
	const cmd = "type = \"command\"\n"
	for _, tc := range []struct {
		name, body, key, msg string
	}{
		{"prometheus without url", "type = \"prometheus\"\n" + pq, "pools.email.source.url", "missing"},
		{"prometheus redis url", "type = \"prometheus\"\nurl = \"redis://h:6379\"\n" + pq, "pools.email.source.url", `scheme "redis"`},
		{"prometheus password in url", "type = \"prometheus\"\nurl = \"https://u:pw@h:9090\"\n" + pq, "pools.email.source.url", "carries a password"},
		{"prometheus without pending_query", prom, "pools.email.source.pending_query", "missing"},
		{"prometheus blank running_query", prom + pq + "running_query = \" \"\n", "pools.email.source.running_query", "must not be empty"},
		{"prometheus query not a string", prom + "pending_query = 3\n", "pools.email.source.pending_query", "must be a string"},
		{"prometheus empty_result", prom + pq + "empty_result = \"nan\"\n", "pools.email.source.empty_result", `want "zero"`},
		{"prometheus with command key", prom + pq + "command = [\"/bin/true\"]\n", "pools.email.source.command", "only for command"},
		{"prometheus with path", prom + pq + "path = \"/x.db\"\n", "pools.email.source.path", "only for flexiq-sqlite"},
		{"command missing", cmd, "pools.email.source.command", "missing"},
		{"command empty", cmd + "command = []\n", "pools.email.source.command", "must not be empty"},
		{"command a string", cmd + "command = \"/bin/q --x\"\n", "pools.email.source.command", "must be an array"},
		{"command relative", cmd + "command = [\"queue-depth\"]\n", "pools.email.source.command", "absolute path"},
		{"command under /home", cmd + "command = [\"/home/a/q.sh\"]\n", "pools.email.source.command", "ProtectHome=tmpfs"},
		{"command under /tmp", cmd + "command = [\"/tmp/q.sh\"]\n", "pools.email.source.command", "PrivateTmp=yes"},
		{"command zero timeout", cmd + "command = [\"/bin/q\"]\ntimeout_sec = 0\n", "pools.email.source.timeout_sec", "must be > 0"},
		{"command timeout string", cmd + "command = [\"/bin/q\"]\ntimeout_sec = \"5s\"\n", "pools.email.source.timeout_sec", "must be a number"},
		{"command with url", cmd + "command = [\"/bin/q\"]\nurl = \"http://h\"\n", "pools.email.source.url", "only for"},
		{"timeout_sec on prometheus", prom + pq + "timeout_sec = 3\n", "pools.email.source.timeout_sec", "only for command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, withSource(tc.body), tc.key, tc.msg)
		})
	}

	c, err := load(t, withSource(prom+pq))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Pools["email"].Source
	want := withSetting(withSetting(withSetting(zeroSettings(got), "pending_query", "sum(queue_waiting)"),
		"empty_result", "zero"), "url", "http://127.0.0.1:9090")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("prometheus defaults: %+v", got)
	}
	c, err = load(t, withSource(cmd+"command = [\"/usr/local/bin/q\", \"--queue\", \"mail\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	got = c.Pools["email"].Source
	if !slices.Equal(setting(got, "command").([]string), []string{"/usr/local/bin/q", "--queue", "mail"}) || setting(got, "timeout_sec") != 10.0 {
		t.Errorf("command defaults: %+v", got.Settings)
	}
	if _, ok := got.Settings.(PromQLSource); ok {
		t.Errorf("a command source has prometheus settings: %+v", got.Settings)
	}
}

// The effective configuration writes every key of both types back, and
// reads back the same.
func TestPrometheusAndCommandRoundTrip(t *testing.T) {
	c, err := load(t, `
[pools.vllm]
exec = ["/usr/bin/worker"]
[pools.vllm.source]
type = "prometheus"
url = "https://metrics@prom.example:9090/prefix"
password_file = "/etc/flexiq-scaled/prom.pw"
pending_query = 'sum(vllm:num_requests_waiting{model="x"})'
running_query = "sum(vllm:num_requests_running)"
paused_query = "0"
oldest_age_query = "time() - min(queue_oldest_ts)"
empty_result = "hold"

[pools.other]
exec = ["/usr/bin/worker"]
[pools.other.source]
type = "command"
command = ["/usr/local/bin/queue-depth", "--json"]
timeout_sec = 2.5
`)
	if err != nil {
		t.Fatal(err)
	}
	again, effective := reloadEffective(t, c)
	for _, want := range []string{"pending_query = ", "oldest_age_query = ", `empty_result = "hold"`, "timeout_sec = 2.5", `command = ["/usr/local/bin/queue-depth", "--json"]`} {
		if !strings.Contains(effective, want) {
			t.Errorf("effective config lacks %q:\n%s", want, effective)
		}
	}
	for name, p := range c.Pools {
		if !reflect.DeepEqual(again.Pools[name].Source, p.Source) {
			t.Errorf("pool %s: round trip changed the source:\n got %+v\nwant %+v", name, again.Pools[name].Source, p.Source)
		}
	}
	old, new := *c.Pools["vllm"], *c.Pools["vllm"]
	new.Source = withSetting(new.Source, "empty_result", "zero")
	if d := Diff(&old, &new); !slices.Equal(d, []string{"source.empty_result"}) {
		t.Errorf("Diff = %q", d)
	}
}
