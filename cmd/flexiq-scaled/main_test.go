package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// result is what one invocation of the command line produced.
type result struct {
	code           int
	stdout, stderr string
}

// invoke runs the command line in-process, as main would.
func invoke(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// writeFile writes text to name in a fresh temp dir. 0600 keeps the file
// root-owned and not group- or world-writable when the tests run as root, so
// check-config's file-safety check passes.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// identity returns a user and group that exist here, for configs that must
// pass check-config's user check.
func identity(t *testing.T) (userName, groupName string) {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Skipf("cannot look up the current user: %v", err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		t.Skipf("cannot look up the current group: %v", err)
	}
	return u.Username, g.Name
}

func TestCheckConfigGood(t *testing.T) {
	userName, groupName := identity(t)
	path := writeFile(t, "config.toml", `
[pools.email]
exec = ["/bin/sh", "-c", "exec sleep infinity"]
user = "`+userName+`"
group = "`+groupName+`"
max_workers = 4

[pools.email.source]
path = "/nonexistent/flexiq.db"
`)
	r := invoke(t, "check-config", path)
	if r.code != 0 {
		t.Fatalf("check-config of a good file: %v", r)
	}
	for _, want := range []string{
		"[daemon]",
		"poll_interval_sec = 5.0",
		"[pools.email]",
		`exec = ["/bin/sh", "-c", "exec sleep infinity"]`,
		`hardening = "default"`,
		"max_surge = 1",
		"min_workers = 1", // default
		"max_workers = 4", // as written
		"target_queue_depth_per_worker = 15.0",
		"target_utilisation = 0.75",
		"threads_per_worker = 4",
		"tolerance = 0.1",
		"scale_down_window_sec = 300.0",
		"drain_timeout_sec = 30.0",
		`drain_signal = "SIGTERM"`,
		"[pools.email.source]",
		`type = "flexiq-sqlite"`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("effective config lacks %q:\n%s", want, r.stdout)
		}
	}
	// The missing database is worth a warning but does not stop the daemon.
	wantWarning := "warning: " + path + ": pools.email.source.path: /nonexistent/flexiq.db does not exist yet"
	if !strings.Contains(r.stderr, wantWarning) {
		t.Errorf("stderr lacks %q:\n%s", wantWarning, r.stderr)
	}
}

func TestCheckConfigProblems(t *testing.T) {
	path := writeFile(t, "config.toml", `
[pools.email]
app = "myapp.tasks:queue"
min_workers = 5
max_workers = 2
max_worker = 3

[pools.email.source]
path = "/var/lib/flexiq/flexiq.db"
`)
	r := invoke(t, "check-config", path)
	if r.code != 1 {
		t.Fatalf("check-config of a bad file: want exit 1, got %v", r)
	}
	if r.stdout != "" {
		t.Errorf("a bad file must print no effective config; stdout:\n%s", r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	for _, want := range []string{
		path + `: pools.email.max_worker: unknown key; did you mean "max_workers"?`,
		path + ": pools.email.max_workers: must be >= min_workers (5)",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("stderr lacks the line %q:\n%s", want, r.stderr)
		}
	}
	// Every line is a problem naming the file.
	for _, l := range lines {
		if !strings.HasPrefix(l, path+": ") {
			t.Errorf("problem line %q does not start with the file name", l)
		}
	}
}

func TestCheckConfigUnknownUser(t *testing.T) {
	path := writeFile(t, "config.toml", `
[pools.email]
app = "myapp.tasks:queue"
user = "no-such-user-flexiq-scaled-test"
group = "no-such-group-flexiq-scaled-test"
[pools.email.source]
path = "/var/lib/flexiq/flexiq.db"
`)
	r := invoke(t, "check-config", path)
	if r.code != 1 {
		t.Fatalf("want exit 1 for a user that does not exist, got %v", r)
	}
	for _, want := range []string{path + ": pools.email.user: ", path + ": pools.email.group: "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

func TestCheckConfigUnreadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.toml")
	r := invoke(t, "check-config", path)
	if r.code != 1 || !strings.Contains(r.stderr, path) {
		t.Fatalf("want exit 1 and an error naming %s, got %v", path, r)
	}
}

// The shipped example must stay valid, and its active part must start no
// workers, since a package installs it as the live config.
func TestExampleConfig(t *testing.T) {
	text, err := os.ReadFile("../../systemd/config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	// A copy, so that the file-safety check sees a file this test owns.
	path := writeFile(t, "config.toml", string(text))
	r := invoke(t, "check-config", path)
	if r.code != 0 {
		t.Fatalf("check-config of the example: %v", r)
	}
	if strings.Contains(r.stdout, "[pools") {
		t.Errorf("the example's active part defines pools:\n%s", r.stdout)
	}
}

// twoPools is a config with pools a and b; b's users need not exist, since
// simulate must not check them.
const twoPools = `
[pools.a]
app = "a"
user = "no-such-user-flexiq-scaled-test"
min_workers = 1
max_workers = 5
target_queue_depth_per_worker = 10
[pools.a.source]
path = "/var/lib/flexiq/a.db"

[pools.b]
exec = ["/usr/bin/b-worker"]
[pools.b.source]
path = "/var/lib/flexiq/b.db"
`

const onePool = `
[pools.a]
app = "a"
user = "no-such-user-flexiq-scaled-test"
min_workers = 1
max_workers = 5
target_queue_depth_per_worker = 10
[pools.a.source]
path = "/var/lib/flexiq/a.db"
`

const trace = `t,pending,running
0,35,0
5,0,3
10,,
`

func TestSimulateJSONL(t *testing.T) {
	cfg := writeFile(t, "config.toml", onePool)
	tr := writeFile(t, "trace.csv", trace)
	r := invoke(t, "simulate", "--config", cfg, "--trace", tr)
	if r.code != 0 {
		t.Fatalf("simulate: %v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("want one line per trace row (3), got %d:\n%s", len(lines), r.stdout)
	}
	wantKeys := []string{"action", "current", "desired", "latency", "oldest_age", "pending", "rationale", "running", "t"}
	var rows []map[string]any
	for _, l := range lines {
		var row map[string]any
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		keys := slices.Sorted(maps.Keys(row))
		if !reflect.DeepEqual(keys, wantKeys) {
			t.Errorf("line %q has keys %v, want %v", l, keys, wantKeys)
		}
		rows = append(rows, row)
	}
	// 35 pending at 10 per worker asks for 4, from min_workers = 1.
	if rows[0]["current"] != 1.0 || rows[0]["desired"] != 4.0 || rows[0]["action"] != "scale-up" {
		t.Errorf("first row: want 1 -> 4 scale-up, got %v", rows[0])
	}
	// The scale-down window (300 s by default) holds the pool at 4.
	if rows[1]["current"] != 4.0 || rows[1]["desired"] != 4.0 {
		t.Errorf("second row: want 4 held by the scale-down window, got %v", rows[1])
	}
	// A failed tick is a hold, with no counts.
	if rows[2]["action"] != "hold" || rows[2]["pending"] != nil {
		t.Errorf("third row: want a hold with null pending, got %v", rows[2])
	}
}

func TestSimulateTableAndInitial(t *testing.T) {
	cfg := writeFile(t, "config.toml", onePool)
	tr := writeFile(t, "trace.csv", trace)
	r := invoke(t, "simulate", "--config", cfg, "--trace", tr, "--format", "table", "--initial", "3")
	if r.code != 0 {
		t.Fatalf("simulate: %v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "T ") {
		t.Fatalf("want a header and 3 rows, got:\n%s", r.stdout)
	}
	if f := strings.Fields(lines[1]); len(f) < 6 || f[4] != "3" {
		t.Errorf("--initial 3: first row's CURRENT should be 3: %q", lines[1])
	}
}

func TestSimulatePoolSelection(t *testing.T) {
	cfg := writeFile(t, "config.toml", twoPools)
	tr := writeFile(t, "trace.csv", trace)

	r := invoke(t, "simulate", "--config", cfg, "--trace", tr)
	if r.code != 2 || !strings.Contains(r.stderr, "--pool") || !strings.Contains(r.stderr, "pools: a, b") {
		t.Errorf("two pools and no --pool: want exit 2 naming --pool and the pools, got %v", r)
	}

	r = invoke(t, "simulate", "--config", cfg, "--trace", tr, "--pool", "c")
	if r.code != 2 || !strings.Contains(r.stderr, `no pool "c"`) || !strings.Contains(r.stderr, "pools: a, b") {
		t.Errorf("unknown --pool: want exit 2 listing the pools, got %v", r)
	}

	r = invoke(t, "simulate", "--config", cfg, "--trace", tr, "--pool", "b")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 3 {
		t.Errorf("--pool b: %v", r)
	}
}

func TestSimulateErrors(t *testing.T) {
	cfg := writeFile(t, "config.toml", onePool)
	badCfg := writeFile(t, "bad.toml", "[pools.a]\nmax_worker = 3\n")
	tr := writeFile(t, "trace.csv", trace)
	badTrace := writeFile(t, "bad.csv", "t,pending,running\n0,x,0\n")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no trace", []string{"--config", cfg}, 2, "--trace or --workload is required"},
		{"bad format", []string{"--config", cfg, "--trace", tr, "--format", "csv"}, 2, `unknown --format "csv"`},
		{"negative initial", []string{"--config", cfg, "--trace", tr, "--initial", "-2"}, 2, "want a whole number >= 0"},
		{"unknown flag", []string{"--bogus"}, 2, "flag provided but not defined: -bogus"},
		{"bad config", []string{"--config", badCfg, "--trace", tr}, 1, badCfg + ": pools.a.max_worker: unknown key"},
		{"missing trace", []string{"--config", cfg, "--trace", tr + ".missing"}, 1, "open trace"},
		{"bad trace", []string{"--config", cfg, "--trace", badTrace}, 1, "trace line 2, column pending"},
		{"negative shift", []string{"--config", cfg, "--workload", tr, "--shift", "-1"}, 2, "--shift must be a number of seconds >= 0"},
		{"NaN shift", []string{"--config", cfg, "--workload", tr, "--shift", "NaN"}, 2, "--shift must be a number of seconds >= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := invoke(t, append([]string{"simulate"}, tt.args...)...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("want exit %d and %q on stderr, got %v", tt.code, tt.want, r)
			}
			if r.stdout != "" {
				t.Errorf("a failed simulation must write nothing to stdout, got:\n%s", r.stdout)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := invoke(t, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "flexiq-scaled ") || !strings.Contains(r.stdout, runtime.Version()) {
			t.Errorf("%v: %v", args, r)
		}
	}
}

func TestUsage(t *testing.T) {
	// Help asked for goes to stdout and succeeds.
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := invoke(t, args...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("%v: want exit 0 and nothing on stderr, got %v", args, r)
		}
		for _, c := range []string{"run", "check-config", "simulate", "version"} {
			if !strings.Contains(r.stdout, "\n  "+c+" ") {
				t.Errorf("%v: usage does not list %s:\n%s", args, c, r.stdout)
			}
		}
	}
	for _, c := range []string{"run", "check-config", "simulate", "version"} {
		for _, args := range [][]string{{c, "--help"}, {c, "-h"}, {"help", c}} {
			r := invoke(t, args...)
			if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: flexiq-scaled "+c) || r.stderr != "" {
				t.Errorf("%v: want exit 0 and %s's usage on stdout, got %v", args, c, r)
			}
		}
	}

	// A command line that cannot be acted on gets the usage on stderr and 2.
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"help", "frobnicate"},
		{"run", "--bogus"},
		{"run", "extra"},
		{"check-config", "a.toml", "b.toml"},
		{"version", "extra"},
	} {
		r := invoke(t, args...)
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "usage: flexiq-scaled") {
			t.Errorf("%v: want exit 2 and the usage on stderr only, got %v", args, r)
		}
	}
}

// The example in the config reference must stay a valid configuration.
func TestConfigReferenceExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "\n## Example\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## Example" section`)
	}
	_, rest, ok = strings.Cut(rest, "```toml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("the Example section has no ```toml block")
	}
	// simulate loads the file without checking users, which do not exist
	// here; a --trace that does not exist then fails only after the load.
	path := writeFile(t, "config.toml", example)
	r := invoke(t, "simulate", "--config", path, "--pool", "email", "--trace", path+".missing")
	if r.code != 1 || !strings.Contains(r.stderr, "open trace") {
		t.Fatalf("the example does not load: %v", r)
	}
}

func TestCheckConfigFileSafety(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the file-safety check applies only when running as root")
	}
	path := writeFile(t, "config.toml", "[daemon]\n")
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	r := invoke(t, "check-config", path)
	if r.code != 1 || !strings.Contains(r.stderr, path+": refusing config") || r.stdout != "" {
		t.Fatalf("a world-writable config as root: want exit 1 and a refusal, got %v", r)
	}
}

// The app shortcut's bare "flexiq" is looked up by systemd in its fixed
// search path, never in the pool's PATH: a virtualenv install would fail
// every start with 203/EXEC. check-config says so, and what to write.
func TestCheckConfigExecutable(t *testing.T) {
	venv := filepath.Join(t.TempDir(), "venv", "bin")
	if err := os.MkdirAll(venv, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(venv, "flexiq-scaled-test-worker"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "config.toml", `
[pools.email]
exec = ["flexiq-scaled-test-worker", "--app", "myapp:q"]
user = "root"
environment = { PATH = "`+venv+`:/usr/bin" }
[pools.email.source]
path = "/var/lib/flexiq/flexiq.db"
`)
	r := invoke(t, "check-config", path)
	want := path + `: pools.email.exec: "flexiq-scaled-test-worker" is not an absolute path, so systemd looks it up in its fixed search path`
	wantFix := `found at ` + venv + `/flexiq-scaled-test-worker via the pool's environment PATH, which systemd does not use: write exec = ["` +
		venv + `/flexiq-scaled-test-worker", ...]`
	if r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, wantFix) {
		t.Errorf("want exit 1 with %q and %q; got %v", want, wantFix, r)
	}
}

// nobody's primary group is nogroup: with no group written, the workers
// get it from systemd, and check-config must not ask for a group "nobody".
func TestCheckConfigUserWithoutGroup(t *testing.T) {
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skipf("no user nobody here: %v", err)
	}
	path := writeFile(t, "config.toml", `
[pools.email]
exec = ["/bin/true"]
user = "nobody"
[pools.email.source]
path = "/var/lib/flexiq/flexiq.db"
`)
	r := invoke(t, "check-config", path)
	if r.code != 0 {
		t.Fatalf("check-config: %v", r)
	}
	if strings.Contains(r.stdout, "group =") {
		t.Errorf("the effective config writes a group that was never set:\n%s", r.stdout)
	}
}

// A database the daemon's sandbox hides is refused, with the reason.
func TestCheckConfigHiddenDatabase(t *testing.T) {
	path := writeFile(t, "config.toml", `
[pools.email]
exec = ["/bin/true"]
user = "root"
[pools.email.source]
path = "/tmp/flexiq.db"
`)
	r := invoke(t, "check-config", path)
	want := path + ": pools.email.source.path: /tmp/flexiq.db is invisible to the daemon: the daemon's unit has PrivateTmp=yes, so it sees its own empty /tmp"
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("want exit 1 with %q; got %v", want, r)
	}
}

func TestObserve(t *testing.T) {
	// Not under /tmp, which the config refuses for a database (the
	// daemon's unit hides it).
	parent := "."
	if os.Geteuid() == 0 {
		parent = "/var/lib"
	}
	dir, err := os.MkdirTemp(parent, "flexiq-observe-test-")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ = filepath.Abs(dir)
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, hidden := range []string{"/tmp/", "/var/tmp/", "/home/", "/root/", "/run/user/"} {
		if strings.HasPrefix(dir, hidden) {
			t.Skipf("needs root, or a checkout outside %s, which the config refuses for a database", hidden)
		}
	}
	dbDir := filepath.Join(dir, "var", "lib")
	os.MkdirAll(dbDir, 0o755)
	db := filepath.Join(dbDir, "q.db")
	cfg := filepath.Join(dir, "config.toml")
	write := func(content string) {
		if err := os.WriteFile(cfg, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(fmt.Sprintf("[pools.q]\nexec = [\"/bin/true\"]\n[pools.q.source]\ntype = \"sqlite-query\"\npath = %q\nquery = \"SELECT 7 AS pending, 2 AS running\"\n", db))
	var out, errs bytes.Buffer
	// No database yet: an error naming the source, exit 1.
	if code := run([]string{"observe", "--config", cfg, "q"}, &out, &errs); code != exitFail || !strings.Contains(errs.String(), "pool q:") {
		t.Fatalf("observe without a database: exit %d, stderr %q", code, errs.String())
	}
	sqlDB, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.Exec("CREATE TABLE t (x)")
	sqlDB.Close()
	out.Reset()
	errs.Reset()
	if code := run([]string{"observe", "--config", cfg, "q"}, &out, &errs); code != exitOK {
		t.Fatalf("observe: exit %d, stderr %q", code, errs.String())
	}
	if got := strings.TrimSpace(out.String()); got != `{"pool":"q","source":"sqlite-query","pending":7,"running":2,"paused":0}` {
		t.Errorf("observe printed %s", got)
	}
	if code := run([]string{"observe", "--config", cfg, "nope"}, &out, &errs); code != exitFail {
		t.Errorf("observe of an unknown pool: exit %d", code)
	}
}

// The shipped examples of trigger rules and the host guard (issue 9) pass
// check-config. They name their workers' users and programs (n8n, render),
// which this machine need not have: those two lines become ones that every
// machine has; everything else is checked as shipped.
func TestRulesExamples(t *testing.T) {
	for _, name := range []string{"n8n-rules.toml", "promql-rules.toml"} {
		t.Run(name, func(t *testing.T) {
			text, err := os.ReadFile("../../packaging/deb/examples/" + name)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, l := range strings.Split(string(text), "\n") {
				switch {
				case strings.HasPrefix(l, "user = "):
					l = `user = "root"`
				case strings.HasPrefix(l, "exec = "):
					l = `exec = ["/bin/sh", "-c", "sleep infinity"]`
				case strings.HasPrefix(l, "working_directory = "):
					l = `working_directory = "/"`
				}
				lines = append(lines, l)
			}
			path := writeFile(t, name, strings.Join(lines, "\n"))
			r := invoke(t, "check-config", path)
			if r.code != 0 {
				t.Fatalf("check-config of %s: %v", name, r)
			}
			if !strings.Contains(r.stdout, `policy = "rules"`) {
				t.Errorf("the effective config lacks the rules policy:\n%s", r.stdout)
			}
		})
	}
}

// The commands whose one argument is a pool name refuse a missing, extra or
// malformed one with a usage error, before touching anything.
func TestOnePoolNameArgument(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"history"}, "no POOL given"},
		{[]string{"history", "a", "b"}, `unexpected argument "b"`},
		{[]string{"history", "--csv", "Bad-Name"}, `pool name "Bad-Name"`},
		{[]string{"pool", "rm"}, "no pool NAME given"},
		{[]string{"pool", "rm", "a", "--no-reload", "b"}, `unexpected argument "b"`},
		{[]string{"pool", "rm", "../etc"}, `pool name "../etc"`},
	} {
		r := invoke(t, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: want exit %d and %q\n%s", tc.args, exitUsage, tc.want, r)
		}
	}
}
