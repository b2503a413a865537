package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestPostgresSources(t *testing.T) {
	c, err := load(t, `
[pools.q]
exec = ["/bin/true"]
[pools.q.source]
type = "postgres-query"
url = "postgres://app@db.example:5432/app"
password_file = "/etc/flexiq-scaled/db.password"
query = "SELECT count(*) FILTER (WHERE queue = ANY(@queues) AND run_at <= now()) AS pending, 0 AS running FROM jobs WHERE tenant = @tenant AND prio >= @min"
[pools.q.source.params]
queues = ["a", "b"]
tenant = "acme"
min = 2

[pools.r]
exec = ["/bin/true"]
[pools.r.source]
type = "river"
url = "postgresql://app@db.example/app"
queues = ["default", "email"]

[pools.b]
exec = ["/bin/true"]
[pools.b.source]
type = "pg-boss"
url_file = "/etc/flexiq-scaled/boss.url"
schema = "boss"

[pools.s]
exec = ["/bin/true"]
[pools.s.source]
type = "solid-queue"
url = "postgres://app@db.example/app_queue"
`)
	if err != nil {
		t.Fatal(err)
	}
	q := c.Pools["q"].Source
	if want := map[string]any{"queues": []string{"a", "b"}, "tenant": "acme", "min": int64(2)}; !reflect.DeepEqual(setting(q, "params"), want) {
		t.Errorf("params = %#v, want %#v", setting(q, "params"), want)
	}
	if setting(q, "password_file") != "/etc/flexiq-scaled/db.password" {
		t.Errorf("password_file = %q", setting(q, "password_file"))
	}
	if r := c.Pools["r"].Source; setting(r, "schema") != "public" || !reflect.DeepEqual(setting(r, "queues"), []string{"default", "email"}) {
		t.Errorf("river: schema %q queues %q, want the default schema public and two queues", setting(r, "schema"), setting(r, "queues"))
	}
	if b := c.Pools["b"].Source; setting(b, "schema") != "boss" || setting(b, "url_file") == "" {
		t.Errorf("pg-boss: %+v", b)
	}
	if s := c.Pools["s"].Source; hasSetting(s, "schema") {
		t.Errorf("solid-queue has no schema setting, got %q", setting(s, "schema"))
	}

	// The effective configuration loads back the same.
	again, effective := reloadEffective(t, c)
	for name, p := range c.Pools {
		if !reflect.DeepEqual(again.Pools[name].Source, p.Source) {
			t.Errorf("pool %s: round trip changed the source:\n%s\n got %+v\nwant %+v", name, effective, again.Pools[name].Source, p.Source)
		}
	}
	if !strings.Contains(effective, `schema = "graphile_worker"`) && !strings.Contains(effective, `schema = "public"`) {
		t.Errorf("effective config does not write the default schema:\n%s", effective)
	}
}

func TestPostgresSourceProblems(t *testing.T) {
	const url = `url = "postgres://app@127.0.0.1/app"` + "\n"
	tests := []struct{ name, body, key, msg string }{
		{"query missing", `type = "postgres-query"` + "\n" + url, "pools.email.source.query", "required for postgres-query"},
		{"url missing", `type = "river"`, "pools.email.source.url", "missing"},
		{"wrong scheme", `type = "oban"` + "\nurl = \"redis://127.0.0.1\"", "pools.email.source.url", "scheme"},
		{"password in url", `type = "good_job"` + "\nurl = \"postgres://app:secret@127.0.0.1/app\"", "pools.email.source.url", "carries a password"},
		{"schema on good_job", `type = "good_job"` + "\n" + url + `schema = "x"`, "pools.email.source.schema", "graphile-worker, oban, pg-boss, river sources, not good_job"},
		{"schema not a name", `type = "pg-boss"` + "\n" + url + `schema = "pg-boss"`, "pools.email.source.schema", "not a schema name"},
		{"queues on postgres-query", `type = "postgres-query"` + "\n" + url + "query = \"SELECT 1 AS pending, 0 AS running\"\nqueues = [\"a\"]", "pools.email.source.queues", "only for"},
		{"params on a preset", `type = "river"` + "\n" + url + "params = { a = 1 }", "pools.email.source.params", "only for postgres-query"},
		{"param unused", `type = "postgres-query"` + "\n" + url + "query = \"SELECT @a AS pending, 0 AS running\"\nparams = { ab = 1 }", "pools.email.source.params.ab", "does not use it"},
		{"param bad name", `type = "postgres-query"` + "\n" + url + "query = \"SELECT 1 AS pending, 0 AS running\"\nparams = { \"a-b\" = 1 }", "pools.email.source.params.a-b", "not a parameter name"},
		{"param table value", `type = "postgres-query"` + "\n" + url + "query = \"SELECT @a AS pending, 0 AS running\"\nparams = { a = { b = 1 } }", "pools.email.source.params.a", "not a table"},
		{"param mixed array", `type = "postgres-query"` + "\n" + url + "query = \"SELECT @a AS pending, 0 AS running\"\nparams = { a = [\"x\", 1] }", "pools.email.source.params.a", "element 2 must be a string"},
		{"params not a table", `type = "postgres-query"` + "\n" + url + "query = \"SELECT 1 AS pending, 0 AS running\"\nparams = 3", "pools.email.source.params", "must be a table of parameters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, withSource(tt.body))
			if err == nil {
				t.Fatal("Load succeeded")
			}
			ps := problems(t, err)
			if len(ps) != 1 || ps[0].Key != tt.key || !strings.Contains(ps[0].Msg, tt.msg) {
				t.Errorf("problems = %v, want one at %q containing %q", ps, tt.key, tt.msg)
			}
		})
	}
}
