package config

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// writeConfig writes text to a config file in a fresh temp dir.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func load(t *testing.T, text string) (*Config, error) {
	t.Helper()
	return Load(writeConfig(t, text))
}

// reloadEffective writes c's effective configuration and loads it again, as
// a round trip must: the configuration it loads to, and its text.
func reloadEffective(t *testing.T, c *Config) (*Config, string) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteEffective(&buf, c); err != nil {
		t.Fatal(err)
	}
	again, err := load(t, buf.String())
	if err != nil {
		t.Fatalf("reloading:\n%s\n%v", buf.String(), err)
	}
	return again, buf.String()
}

// pool is a valid one-pool config with extra lines in [pools.email].
func pool(extra string) string {
	return `[pools.email]
app = "myapp.tasks:queue"
` + extra + `
[pools.email.source]
path = "/var/lib/flexiq/flexiq.db"
`
}

// withSource is a valid one-pool config with the given [pools.email.source]
// body.
func withSource(body string) string {
	return `[pools.email]
app = "myapp.tasks:queue"
[pools.email.source]
` + body + "\n"
}

func problems(t *testing.T, err error) []Problem {
	t.Helper()
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("error %v (%T) is not a *config.Error", err, err)
	}
	return cerr.Problems
}

// refused loads text, which Load must refuse with a *config.Error and no
// configuration, and returns the file's path and the problems.
func refused(t *testing.T, text string) (string, []Problem) {
	t.Helper()
	path := writeConfig(t, text)
	c, err := Load(path)
	if err == nil {
		t.Fatalf("loaded:\n%s", text)
	}
	if c != nil {
		t.Errorf("Load returned a config alongside its error")
	}
	return path, problems(t, err)
}

// wantProblem fails t unless Load refuses text with a problem in that file
// at key whose message contains msg, among any others.
func wantProblem(t *testing.T, text, key, msg string) {
	t.Helper()
	path, ps := refused(t, text)
	for _, p := range ps {
		if p.File == path && p.Key == key && strings.Contains(p.Msg, msg) {
			return
		}
	}
	t.Errorf("no problem %s: %s: …%s… in:\n%v", path, key, msg, &Error{ps})
}

// wantOnlyProblem is wantProblem where that problem must be the only one.
func wantOnlyProblem(t *testing.T, text, key, msg string) {
	t.Helper()
	path, ps := refused(t, text)
	if len(ps) != 1 || ps[0].File != path || ps[0].Key != key || !strings.Contains(ps[0].Msg, msg) {
		t.Errorf("problems:\n%v\nwant only %s: %s: …%s…", &Error{ps}, path, key, msg)
	}
}

func TestValidationRules(t *testing.T) {
	tests := []struct {
		name string
		text string
		key  string
		msg  string
	}{
		// Decoding.
		{"syntax error", pool("min_workers = \n"), "", "line 3"},
		{"table given a value", "[pools.email]\nsource = \"/x.db\"\n", "pools.email.source", "must be a table (line 2)"},
		{"pool given a value", "[pools]\nemail = 3\n", "pools.email", "must be a table (line 2)"},
		{"pool given an array", "[[pools.email]]\napp = \"x\"\n", "pools.email", "must be a table (line 1)"},
		{"pools given a value", "pools = 3\n", "pools", "must be a table of pools"},
		{"pools given an array", "[[pools]]\nemail = 3\n", "pools", "must be a table of pools"},
		{"unknown pool key", pool("max_worker = 3"), "pools.email.max_worker", `unknown key; did you mean "max_workers"?`},
		{"unknown key far from any", pool("colour = 3"), "pools.email.colour", "unknown key"},
		{"unknown daemon key", "[daemon]\npoll_interval = 5\n", "daemon.poll_interval", `did you mean "poll_interval_sec"?`},
		{"unknown source key", withSource(`paht = "/x.db"` + "\npath = \"/x.db\""), "pools.email.source.paht", `did you mean "path"?`},
		{"unknown limits key", pool("[pools.email.limits]\ntask_max = 5"), "pools.email.limits.task_max", `did you mean "tasks_max"?`},
		{"unknown table", "[pool.email]\napp = \"x\"\n", "pool.email", "unknown key"},

		// Types.
		{"integer as string", pool(`min_workers = "one"`), "pools.email.min_workers", "must be an integer, not a string"},
		{"integer as float", pool(`max_workers = 2.5`), "pools.email.max_workers", "must be an integer, not a float"},
		{"integer out of range", pool(`max_workers = 9999999999`), "pools.email.max_workers", "out of range"},
		{"number as string", pool(`target_utilisation = "high"`), "pools.email.target_utilisation", "must be a number, not a string"},
		{"number not finite", pool(`tolerance = nan`), "pools.email.tolerance", "finite"},
		{"seconds as boolean", pool(`drain_timeout_sec = true`), "pools.email.drain_timeout_sec", "must be a number, not a boolean"},
		{"seconds too large", pool(`scale_down_window_sec = 1e300`), "pools.email.scale_down_window_sec", "too large"},
		{"string as integer", pool(`user = 0`), "pools.email.user", "must be a string, not an integer"},

		// Scaling knobs.
		{"min negative", pool("min_workers = -1"), "pools.email.min_workers", "must be >= 0"},
		{"max zero", pool("min_workers = 0\nmax_workers = 0"), "pools.email.max_workers", "must be >= 1"},
		{"max below min", pool("min_workers = 5\nmax_workers = 2"), "pools.email.max_workers", "must be >= min_workers (5)"},
		{"max below default min", pool("min_workers = 12"), "pools.email.max_workers", "must be >= min_workers (12)"},
		{"depth zero", pool("target_queue_depth_per_worker = 0"), "pools.email.target_queue_depth_per_worker", "must be >= 1"},
		{"depth fraction", pool("target_queue_depth_per_worker = 0.5"), "pools.email.target_queue_depth_per_worker", "must be >= 1"},
		{"utilisation zero", pool("target_utilisation = 0"), "pools.email.target_utilisation", "must be in (0, 1]"},
		{"utilisation above one", pool("target_utilisation = 1.01"), "pools.email.target_utilisation", "must be in (0, 1]"},
		{"tolerance one", pool("tolerance = 1"), "pools.email.tolerance", "must be in [0, 1)"},
		{"tolerance negative", pool("tolerance = -0.1"), "pools.email.tolerance", "must be in [0, 1)"},
		{"scale-up window negative", pool("scale_up_window_sec = -1"), "pools.email.scale_up_window_sec", "must be >= 0"},
		{"scale-down window negative", pool("scale_down_window_sec = -0.5"), "pools.email.scale_down_window_sec", "must be >= 0"},
		{"drain timeout negative", pool("drain_timeout_sec = -30"), "pools.email.drain_timeout_sec", "must be >= 0"},
		{"pool poll too fast", pool("poll_interval_sec = 0.05"), "pools.email.poll_interval_sec", "must be >= 0.1"},
		{"daemon poll too fast", "[daemon]\npoll_interval_sec = 0\n", "daemon.poll_interval_sec", "must be >= 0.1"},
		{"threads zero", pool("threads_per_worker = 0"), "pools.email.threads_per_worker", "must be >= 1"},
		{"cpu target zero", pool("target_cpu_utilisation = 0"), "pools.email.target_cpu_utilisation", "must be in (0, 1]"},
		{"cpu target above one", pool("target_cpu_utilisation = 1.5"), "pools.email.target_cpu_utilisation", "must be in (0, 1]"},
		{"cpu per worker zero", pool("cpu_per_worker = 0"), "pools.email.cpu_per_worker", "must be > 0"},
		{"latency target zero", pool("target_queue_latency_sec = 0"), "pools.email.target_queue_latency_sec", "must be > 0"},
		{"latency target negative", pool("target_queue_latency_sec = -5"), "pools.email.target_queue_latency_sec", "must be > 0"},
		{"latency target too large", pool("target_queue_latency_sec = 1e300"), "pools.email.target_queue_latency_sec", "too large"},
		{"latency target not a number", pool(`target_queue_latency_sec = "30s"`), "pools.email.target_queue_latency_sec", "must be a number"},

		// Names and command.
		{"pool name upper case", strings.ReplaceAll(pool(""), "email", "Email"), "pools.Email", "[a-z0-9_]{1,32}"},
		{"pool name dash", strings.ReplaceAll(pool(""), "email", "e-mail"), "pools.e-mail", "[a-z0-9_]{1,32}"},
		{"pool name too long", strings.ReplaceAll(pool(""), "email", strings.Repeat("a", 33)), "pools." + strings.Repeat("a", 33), "[a-z0-9_]{1,32}"},
		{"no command", "[pools.email]\n[pools.email.source]\npath = \"/x.db\"\n", "pools.email.exec", "missing: set exec"},
		{"app and exec", pool(`exec = ["/bin/worker"]`), "pools.email.exec", "not both"},
		{"app empty", strings.Replace(pool(""), `"myapp.tasks:queue"`, `""`, 1), "pools.email.app", "must not be empty"},
		{"exec empty", strings.Replace(pool(""), `app = "myapp.tasks:queue"`, `exec = []`, 1), "pools.email.exec", "must not be empty"},
		{"exec command empty", strings.Replace(pool(""), `app = "myapp.tasks:queue"`, `exec = ["", "x"]`, 1), "pools.email.exec", "first element"},
		{"exec not array", strings.Replace(pool(""), `app = "myapp.tasks:queue"`, `exec = "/bin/worker"`, 1), "pools.email.exec", "must be an array of strings, not a string"},
		{"exec element not string", strings.Replace(pool(""), `app = "myapp.tasks:queue"`, `exec = ["/bin/w", 3]`, 1), "pools.email.exec", "element 2 must be a string"},
		{"user empty", pool(`user = ""`), "pools.email.user", "must not be empty"},
		{"group empty", pool(`group = ""`), "pools.email.group", "must not be empty"},
		{"working directory relative", pool(`working_directory = "opt/app"`), "pools.email.working_directory", "absolute"},
		{"environment name", pool(`environment = { "1BAD" = "x" }`), "pools.email.environment.1BAD", "not a valid environment variable name"},
		{"environment reserved pool", pool(`environment = { FLEXIQ_SCALED_POOL = "x" }`), "pools.email.environment.FLEXIQ_SCALED_POOL", "reserved"},
		{"environment reserved slot", pool(`environment = { FLEXIQ_SCALED_SLOT = "1" }`), "pools.email.environment.FLEXIQ_SCALED_SLOT", "reserved"},
		{"environment value", pool(`environment = { PORT = 8080 }`), "pools.email.environment.PORT", "must be a string, not an integer"},
		{"environment not a table", pool(`environment = "A=B"`), "pools.email.environment", "must be a table of strings"},
		{"drain signal unknown", pool(`drain_signal = "SIGFOO"`), "pools.email.drain_signal", `unknown signal "SIGFOO"`},
		{"drain signal uncatchable", pool(`drain_signal = "KILL"`), "pools.email.drain_signal", "SIGKILL cannot be caught"},

		// Source.
		{"source missing", "[pools.email]\napp = \"x\"\n", "pools.email.source.path", "missing"},
		{"source type unknown", withSource(`type = "postgres"` + "\npath = \"/x.db\""), "pools.email.source.type", `unknown source type "postgres"`},
		{"source path relative", withSource(`path = "flexiq.db"`), "pools.email.source.path", "absolute"},
		{"query missing", withSource(`type = "sqlite-query"` + "\npath = \"/x.db\""), "pools.email.source.query", "required for sqlite-query"},
		{"query empty", withSource(`type = "sqlite-query"` + "\npath = \"/x.db\"\nquery = \" \""), "pools.email.source.query", "must not be empty"},
		{"query on flexiq-sqlite", withSource(`path = "/x.db"` + "\nquery = \"SELECT 1, 2\""), "pools.email.source.query", "sqlite-query sources, not flexiq-sqlite"},
		{"queues on sqlite-query", withSource("type = \"sqlite-query\"\npath = \"/x.db\"\nquery = \"SELECT 1, 2\"\nqueues = [\"a\"]"), "pools.email.source.queues", "sources, not sqlite-query"},
		{"namespace on sqlite-query", withSource("type = \"sqlite-query\"\npath = \"/x.db\"\nquery = \"SELECT 1, 2\"\nnamespace = \"a\""), "pools.email.source.namespace", "sources, not sqlite-query"},
		{"queue name empty", withSource("path = \"/x.db\"\nqueues = [\"\"]"), "pools.email.source.queues", "must not be empty"},

		// Limits.
		{"cpu quota without percent", pool("[pools.email.limits]\ncpu_quota = \"100\""), "pools.email.limits.cpu_quota", "percentage"},
		{"cpu quota zero", pool("[pools.email.limits]\ncpu_quota = \"0%\""), "pools.email.limits.cpu_quota", "percentage above 0"},
		{"cpu quota junk", pool("[pools.email.limits]\ncpu_quota = \"-5%\""), "pools.email.limits.cpu_quota", "percentage"},
		{"memory max suffix", pool("[pools.email.limits]\nmemory_max = \"1X\""), "pools.email.limits.memory_max", "K, M, G or T"},
		{"memory max zero", pool("[pools.email.limits]\nmemory_max = \"0\""), "pools.email.limits.memory_max", "above 0"},
		{"memory max negative", pool("[pools.email.limits]\nmemory_max = -1"), "pools.email.limits.memory_max", "above 0"},
		{"memory max fractional bytes", pool("[pools.email.limits]\nmemory_max = \"1.5\""), "pools.email.limits.memory_max", "byte count"},
		{"memory max type", pool("[pools.email.limits]\nmemory_max = true"), "pools.email.limits.memory_max", "must be a string or an integer"},
		{"tasks max zero", pool("[pools.email.limits]\ntasks_max = 0"), "pools.email.limits.tasks_max", "must be >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantOnlyProblem(t, tt.text, tt.key, tt.msg)
		})
	}
}

func TestDefaults(t *testing.T) {
	c, err := load(t, pool(""))
	if err != nil {
		t.Fatal(err)
	}
	want := &Pool{
		Name:                      "email",
		App:                       "myapp.tasks:queue",
		Exec:                      []string{"flexiq", "worker", "--app", "myapp.tasks:queue"},
		User:                      "flexiq",
		Hardening:                 "default",
		Mode:                      "active",
		MaxSurge:                  1,
		MinWorkers:                1,
		MaxWorkers:                10,
		TargetQueueDepthPerWorker: 15,
		TargetUtilisation:         0.75,
		ThreadsPerWorker:          4,
		CPUPerWorker:              1,
		Tolerance:                 0.1,
		ScaleUpWindow:             0,
		ScaleDownWindow:           300 * time.Second,
		PollInterval:              5 * time.Second,
		DrainTimeout:              30 * time.Second,
		DrainSignal:               "SIGTERM",
		DrainSignalNumber:         15,
		Scaling:                   Scaling{Policy: PolicyHPA},
	}
	want.Source = withSetting(zeroSettings(c.Pools["email"].Source), "path", "/var/lib/flexiq/flexiq.db")
	if want.Source.Type != "flexiq-sqlite" {
		t.Errorf("default source type %q", want.Source.Type)
	}
	if got := c.Pools["email"]; !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, want)
	}
	if c.Daemon.PollInterval != 5*time.Second {
		t.Errorf("daemon poll interval = %v, want 5s", c.Daemon.PollInterval)
	}
}

func TestValues(t *testing.T) {
	c, err := load(t, `
[daemon]
poll_interval_sec = 2

[pools.email]
exec = ["/opt/myapp/.venv/bin/flexiq", "worker", "--app", "myapp.tasks:queue"]
user = "root"
working_directory = "/opt/myapp"
environment = { FLEXIQ_DB_PATH = "/var/lib/flexiq/flexiq.db" }
target_utilisation = 1
target_cpu_utilisation = 0.8
scale_down_window_sec = 0.5
drain_timeout_sec = 12
drain_signal = "usr1"
[pools.email.source]
path = "/var/lib/flexiq/flexiq.db"
queues = ["email", "sms"]
namespace = "prod"
[pools.email.limits]
cpu_quota = "12.5%"
memory_max = "1.5G"
tasks_max = 512

[pools.reports]
app = "reports:queue"
poll_interval_sec = 0.25
[pools.reports.source]
type = "sqlite-query"
path = "/srv/reports.db"
query = "SELECT 1, 2"
[pools.reports.limits]
memory_max = 1024
`)
	if err != nil {
		t.Fatal(err)
	}
	email, reports := c.Pools["email"], c.Pools["reports"]
	checks := []struct {
		name      string
		got, want any
	}{
		{"daemon poll", c.Daemon.PollInterval, 2 * time.Second},
		{"poll inherited from daemon", email.PollInterval, 2 * time.Second},
		{"poll own", reports.PollInterval, 250 * time.Millisecond},
		{"exec", email.Exec, []string{"/opt/myapp/.venv/bin/flexiq", "worker", "--app", "myapp.tasks:queue"}},
		{"app unset", email.App, ""},
		{"user", email.User, "root"},
		{"user explicit", email.UserExplicit, true},
		{"group unset: the user's primary group", email.Group, ""},
		{"default user not explicit", reports.UserExplicit, false},
		{"environment", email.Environment, map[string]string{"FLEXIQ_DB_PATH": "/var/lib/flexiq/flexiq.db"}},
		{"integer utilisation", email.TargetUtilisation, 1.0},
		{"cpu target", email.TargetCPUUtilisation, 0.8},
		{"fractional window", email.ScaleDownWindow, 500 * time.Millisecond},
		{"drain timeout", email.DrainTimeout, 12 * time.Second},
		{"drain signal", email.DrainSignal, "SIGUSR1"},
		{"drain signal number", email.DrainSignalNumber, 10},
		{"queues", setting(email.Source, "queues"), []string{"email", "sms"}},
		{"namespace", setting(email.Source, "namespace"), "prod"},
		{"cpu quota", email.Limits.CPUQuotaPerSecUSec, uint64(125_000)},
		{"memory max", email.Limits.MemoryMaxBytes, uint64(1536 << 20)},
		{"memory max as written", email.Limits.MemoryMax, "1.5G"},
		{"tasks max", email.Limits.TasksMax, uint64(512)},
		{"query", setting(reports.Source, "query"), "SELECT 1, 2"},
		{"integer memory max", reports.Limits.MemoryMaxBytes, uint64(1024)},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestParseLimits(t *testing.T) {
	quotas := map[string]uint64{"100%": 1_000_000, "150%": 1_500_000, "1%": 10_000, "0.01%": 100}
	for s, want := range quotas {
		if got, ok := parseCPUQuota(s); !ok || got != want {
			t.Errorf("parseCPUQuota(%q) = %d, %t; want %d", s, got, ok, want)
		}
	}
	sizes := map[string]uint64{
		"1": 1, "1K": 1 << 10, "512M": 512 << 20, "1G": 1 << 30, "2T": 2 << 40,
		"infinity": math.MaxUint64, "18446744073709551615": math.MaxUint64,
	}
	for s, want := range sizes {
		if got, ok := parseSize(s); !ok || got != want {
			t.Errorf("parseSize(%q) = %d, %t; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "G", "1g", "1.G", "1e3", "1 G", "16777216T"} {
		if got, ok := parseSize(s); ok {
			t.Errorf("parseSize(%q) = %d, want an error", s, got)
		}
	}
}

func TestZeroPools(t *testing.T) {
	for _, text := range []string{"", "[daemon]\npoll_interval_sec = 1\n"} {
		c, err := load(t, text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if c.Pools == nil || len(c.Pools) != 0 {
			t.Errorf("%q: pools = %#v, want an empty map", text, c.Pools)
		}
	}
}

func TestAllProblemsReported(t *testing.T) {
	path := writeConfig(t, `
[pools.email]
app = "x"
max_worker = 3
min_workers = -1
tolerance = 2
[pools.email.source]
type = "sqlite-query"
path = "/x.db"

[pools.Bad]
[pools.Bad.source]
path = "/x.db"
`)
	_, err := Load(path)
	want := []string{
		path + ": pools.email.max_worker: unknown key",
		path + ": pools.Bad: pool name must match",
		path + ": pools.Bad.exec: missing",
		path + ": pools.email.min_workers: must be >= 0",
		path + ": pools.email.tolerance: must be in [0, 1)",
		path + ": pools.email.source.query: required for sqlite-query",
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%v", len(lines), len(want), err)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d = %q, want prefix %q", i+1, lines[i], want[i])
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want one wrapping fs.ErrNotExist", err)
	}
}

func TestWriteEffectiveRoundTrip(t *testing.T) {
	c, err := load(t, `
[daemon]
poll_interval_sec = 2.5

[pools.email]
app = "myapp.tasks:queue"
group = "mail"
environment = { FLEXIQ_DB_PATH = "/var/lib/flexiq/flexiq.db", LANG = "C.UTF-8" }
min_workers = 0
target_cpu_utilisation = 0.8
target_queue_latency_sec = 7.5
scale_up_window_sec = 0.1
drain_signal = "INT"
[pools.email.source]
path = "/var/lib/flexiq/flexiq.db"
queues = ["email"]
namespace = "prod"
[pools.email.limits]
cpu_quota = "150%"
memory_max = 1073741824
tasks_max = 64

[pools.reports]
exec = ["/usr/bin/reports-worker", "--quiet"]
user = "reports"
working_directory = "/srv/reports"
environment_file = ["/etc/reports/env", "-/etc/reports/local.env"]
hardening = "strict"
max_surge = 2
[pools.reports.source]
type = "sqlite-query"
path = "/srv/reports.db"
query = """
SELECT count(*) FILTER (WHERE state = 'pending'),
       count(*) FILTER (WHERE state = "running")
FROM jobs"""
`)
	if err != nil {
		t.Fatal(err)
	}
	again, effective := reloadEffective(t, c)
	// Writing the defaults out makes them explicit; that is the one
	// expected difference.
	again.Path = c.Path
	for _, p := range c.Pools {
		p.UserExplicit = true
	}
	if !reflect.DeepEqual(again, c) {
		t.Errorf("round trip changed the config:\n%s\n got %+v\nwant %+v", effective, again.Pools, c.Pools)
	}
	for _, want := range []string{"max_workers = 10", `user = "flexiq"`, "scale_down_window_sec = 300", `hardening = "default"`, "max_surge = 1"} {
		if !strings.Contains(effective, want) {
			t.Errorf("effective config lacks default %q:\n%s", want, effective)
		}
	}
	// An unset group is the user's primary group: writing one out would
	// change what the workers run as.
	if n := strings.Count(effective, "group = "); n != 1 {
		t.Errorf("effective config writes %d groups, want only the one set:\n%s", n, effective)
	}
}

func TestPolicyParams(t *testing.T) {
	c, err := load(t, pool("min_workers = 2\nmax_workers = 7\ntarget_cpu_utilisation = 0.6\ntarget_queue_latency_sec = 2.5\nscale_up_window_sec = 15"))
	if err != nil {
		t.Fatal(err)
	}
	want := policy.Params{
		MinWorkers:                2,
		MaxWorkers:                7,
		TargetQueueDepthPerWorker: 15,
		TargetUtilisation:         0.75,
		ThreadsPerWorker:          4,
		TargetCPUUtilisation:      0.6,
		TargetQueueLatency:        2500 * time.Millisecond,
		Tolerance:                 0.1,
		ScaleUpWindow:             15 * time.Second,
		ScaleDownWindow:           300 * time.Second,
		PollInterval:              5 * time.Second,
	}
	if got := c.Pools["email"].PolicyParams(); got != want {
		t.Errorf("PolicyParams = %+v, want %+v", got, want)
	}
}
