package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFlexiqNetSources(t *testing.T) {
	c, err := load(t, withSource("type = \"flexiq-postgres\"\nurl = \"postgres://flexiq@db:5432/app\"\nqueues = [\"email\"]"))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Pools["email"].Source
	if setting(s, "schema") != "flexiq" || setting(s, "url") != "postgres://flexiq@db:5432/app" || len(setting(s, "queues").([]string)) != 1 {
		t.Errorf("flexiq-postgres defaults: %+v", s)
	}
	c, err = load(t, withSource("type = \"flexiq-redis\"\nurl = \"redis://127.0.0.1:6379/0\"\nqueues = [\"a\", \"b\"]\nkey_prefix = \"app:\"\nnamespace = \"acme\""))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Pools["email"].Source; setting(s, "key_prefix") != "app:" || setting(s, "namespace") != "acme" {
		t.Errorf("flexiq-redis: %+v", s)
	}
	var b strings.Builder
	if err := WriteEffective(&b, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `key_prefix = "app:"`) {
		t.Errorf("effective config lacks key_prefix:\n%s", b.String())
	}
}

func TestFlexiqNetValidation(t *testing.T) {
	for _, tt := range []struct{ name, text, key, msg string }{
		{"redis without queues", withSource("type = \"flexiq-redis\"\nurl = \"redis://h\""), "pools.email.source.queues", "required for flexiq-redis"},
		{"redis wrong scheme", withSource("type = \"flexiq-redis\"\nurl = \"postgres://h\"\nqueues = [\"a\"]"), "pools.email.source.url", "scheme"},
		{"postgres password in url", withSource("type = \"flexiq-postgres\"\nurl = \"postgres://u:pw@h/db\""), "pools.email.source.url", "carries a password"},
		{"postgres bad schema", withSource("type = \"flexiq-postgres\"\nurl = \"postgres://h/db\"\nschema = \"a-b\""), "pools.email.source.schema", "letters, digits and underscores"},
		{"schema on redis", withSource("type = \"flexiq-redis\"\nurl = \"redis://h\"\nqueues = [\"a\"]\nschema = \"x\""), "pools.email.source.schema", "only for flexiq-postgres"},
		{"key_prefix on postgres", withSource("type = \"flexiq-postgres\"\nurl = \"postgres://h/db\"\nkey_prefix = \"x\""), "pools.email.source.key_prefix", "flexiq-redis sources, not flexiq-postgres"},
		{"threads auto on sqlite-query", "[pools.email]\napp = \"x\"\nthreads_per_worker = \"auto\"\n[pools.email.source]\ntype = \"sqlite-query\"\npath = \"/x.db\"\nquery = \"SELECT 1, 2\"\n", "pools.email.threads_per_worker", "only for flexiq-postgres, flexiq-redis, flexiq-sqlite"},
		{"threads other string", pool(`threads_per_worker = "many"`), "pools.email.threads_per_worker", `want an integer or "auto"`},
		{"fallback without auto", pool("threads_per_worker_fallback = 2"), "pools.email.threads_per_worker_fallback", `only with threads_per_worker = "auto"`},
		{"fallback zero", pool("threads_per_worker = \"auto\"\nthreads_per_worker_fallback = 0"), "pools.email.threads_per_worker_fallback", "must be >= 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.text)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			ps := problems(t, err)
			if len(ps) != 1 || ps[0].Key != tt.key || !strings.Contains(ps[0].Msg, tt.msg) {
				t.Errorf("problems %v; want one at %q containing %q", ps, tt.key, tt.msg)
			}
		})
	}
}

func TestThreadsAuto(t *testing.T) {
	c, err := load(t, pool(`threads_per_worker = "auto"`))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Pools["email"]; !p.ThreadsAuto || p.ThreadsPerWorker != DefaultThreadsFallback {
		t.Errorf("auto: ThreadsAuto %v, ThreadsPerWorker %d", p.ThreadsAuto, p.ThreadsPerWorker)
	}
	c, err = load(t, pool("threads_per_worker = \"auto\"\nthreads_per_worker_fallback = 8"))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Pools["email"]; !p.ThreadsAuto || p.ThreadsPerWorker != 8 {
		t.Errorf("auto with fallback: %v %d", p.ThreadsAuto, p.ThreadsPerWorker)
	}
	// The effective configuration says "auto", and loads back the same.
	var b strings.Builder
	if err := WriteEffective(&b, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `threads_per_worker = "auto"`) || !strings.Contains(b.String(), "threads_per_worker_fallback = 8") {
		t.Fatalf("effective:\n%s", b.String())
	}
	path := filepath.Join(t.TempDir(), "effective.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(c.Pools["email"], again.Pools["email"]); slices.Contains(d, "threads_per_worker") || slices.Contains(d, "threads_per_worker_fallback") {
		t.Errorf("effective config loads back different: %v", d)
	}
	if d := Diff(c.Pools["email"], func() *Pool { p := *c.Pools["email"]; p.ThreadsAuto = false; return &p }()); len(d) != 1 || d[0] != "threads_per_worker" {
		t.Errorf("Diff of ThreadsAuto = %v", d)
	}
}
