package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"golang.org/x/sys/unix"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// Source types.
const (
	SourceFlexiqSQLite = "flexiq-sqlite" // flexiq's own task table
	SourceSQLiteQuery  = "sqlite-query"  // any SQLite file, via a SELECT returning pending, running
)

// DefaultUser runs the workers of pools that name no user. Root is never a
// default: it has to be written out.
const DefaultUser = "flexiq"

const (
	defaultPollInterval = 5 * time.Second
	// Below this the daemon would spend its time polling SQLite and systemd.
	minPollInterval = 100 * time.Millisecond
)

var (
	// Pool names end up in unit names (flexiq-worker@NAME-SLOT) and metric
	// labels, so they are kept to characters that need no escaping anywhere.
	poolNameRE = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)
	envNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	decimalRE  = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
)

// reservedEnv are set by the daemon on every worker, so that a worker knows
// which pool and slot it is; a pool must not override them.
var reservedEnv = []string{"FLEXIQ_SCALED_POOL", "FLEXIQ_SCALED_SLOT"}

// defaultPool is a pool with every default of flexiq's AutoscaleConfig.
func defaultPool(name string, poll time.Duration) *Pool {
	return &Pool{
		Name:                      name,
		User:                      DefaultUser,
		MinWorkers:                1,
		MaxWorkers:                10,
		TargetQueueDepthPerWorker: 15,
		TargetUtilisation:         0.75,
		ThreadsPerWorker:          4,
		CPUPerWorker:              1.0,
		Tolerance:                 0.1,
		ScaleUpWindow:             0,
		ScaleDownWindow:           300 * time.Second,
		PollInterval:              poll,
		DrainTimeout:              30 * time.Second,
		DrainSignal:               "SIGTERM",
		DrainSignalNumber:         int(unix.SIGTERM),
		Source:                    Source{Type: SourceFlexiqSQLite},
	}
}

// PolicyParams are the pool's scaling knobs as the policy package takes them.
func (p *Pool) PolicyParams() policy.Params {
	return policy.Params{
		MinWorkers:                p.MinWorkers,
		MaxWorkers:                p.MaxWorkers,
		TargetQueueDepthPerWorker: p.TargetQueueDepthPerWorker,
		TargetUtilisation:         p.TargetUtilisation,
		ThreadsPerWorker:          p.ThreadsPerWorker,
		TargetCPUUtilisation:      p.TargetCPUUtilisation,
		Tolerance:                 p.Tolerance,
		ScaleUpWindow:             p.ScaleUpWindow,
		ScaleDownWindow:           p.ScaleDownWindow,
	}
}

// value holds one leaf of the file as the TOML decoder found it. Leaves are
// typed during validation rather than by the decoder, because the decoder
// stops at the first type mismatch and a wrong type should be one more
// problem in the list, not the only one. Tables stay structs so that
// MetaData.Undecoded still finds unknown keys.
type value struct{ raw any }

// UnmarshalTOML implements toml.Unmarshaler.
func (v *value) UnmarshalTOML(data any) error {
	v.raw = data
	return nil
}

func (v value) set() bool { return v.raw != nil }

type rawFile struct {
	Daemon rawDaemon          `toml:"daemon"`
	Pools  map[string]rawPool `toml:"pools"`
}

type rawDaemon struct {
	PollIntervalSec value `toml:"poll_interval_sec"`
}

type rawPool struct {
	App                       value     `toml:"app"`
	Exec                      value     `toml:"exec"`
	User                      value     `toml:"user"`
	Group                     value     `toml:"group"`
	WorkingDirectory          value     `toml:"working_directory"`
	Environment               value     `toml:"environment"`
	MinWorkers                value     `toml:"min_workers"`
	MaxWorkers                value     `toml:"max_workers"`
	TargetQueueDepthPerWorker value     `toml:"target_queue_depth_per_worker"`
	TargetUtilisation         value     `toml:"target_utilisation"`
	ThreadsPerWorker          value     `toml:"threads_per_worker"`
	TargetCPUUtilisation      value     `toml:"target_cpu_utilisation"`
	CPUPerWorker              value     `toml:"cpu_per_worker"`
	Tolerance                 value     `toml:"tolerance"`
	ScaleUpWindowSec          value     `toml:"scale_up_window_sec"`
	ScaleDownWindowSec        value     `toml:"scale_down_window_sec"`
	PollIntervalSec           value     `toml:"poll_interval_sec"`
	DrainTimeoutSec           value     `toml:"drain_timeout_sec"`
	DrainSignal               value     `toml:"drain_signal"`
	Source                    rawSource `toml:"source"`
	Limits                    rawLimits `toml:"limits"`
}

type rawSource struct {
	Type      value `toml:"type"`
	Path      value `toml:"path"`
	Queues    value `toml:"queues"`
	Namespace value `toml:"namespace"`
	Query     value `toml:"query"`
}

type rawLimits struct {
	CPUQuota  value `toml:"cpu_quota"`
	MemoryMax value `toml:"memory_max"`
	TasksMax  value `toml:"tasks_max"`
}

// Load reads, defaults and validates the configuration at path. Problems in
// the file come back together as an *Error; failing to read it is a plain
// error wrapping the os error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parse(path, data)
}

func parse(path string, data []byte) (*Config, error) {
	l := &loader{file: path}
	var raw rawFile
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		key, msg := decodeProblem(err)
		l.add(key, "%s", msg)
		return nil, l.err()
	}
	// The decoder silently skips a non-table where it expects a map, which
	// would turn "pools = 3" into a daemon with no pools.
	undecoded := md.Undecoded()
	if t := md.Type("pools"); t != "" && t != "Hash" {
		l.add("pools", "must be a table of pools, as in [pools.NAME]")
		// Nothing under it was decoded; one complaint is enough.
		undecoded = slices.DeleteFunc(undecoded, func(k toml.Key) bool { return k[0] == "pools" })
	}
	l.unknownKeys(undecoded)

	c := &Config{
		Path:   path,
		Daemon: Daemon{PollInterval: defaultPollInterval},
		Pools:  make(map[string]*Pool, len(raw.Pools)),
	}
	if l.seconds("daemon.poll_interval_sec", raw.Daemon.PollIntervalSec, &c.Daemon.PollInterval) &&
		c.Daemon.PollInterval < minPollInterval {
		l.add("daemon.poll_interval_sec", "must be >= 0.1")
	}
	// Sorted, so that problems come out in the same order on every run.
	for _, name := range slices.Sorted(maps.Keys(raw.Pools)) {
		r := raw.Pools[name]
		c.Pools[name] = l.pool(name, &r, c.Daemon.PollInterval)
	}
	if err := l.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// tableMismatchRE matches the decoder's complaint about a value where the
// schema has a table, e.g. source = "/x.db" for [pools.NAME.source].
var tableMismatchRE = regexp.MustCompile(`^toml: line (\d+) \(last key (".*")\): type mismatch for \S+: expected table but found`)

// decodeProblem turns a decoder error into a problem's key and message; either
// way the message carries the line.
func decodeProblem(err error) (key, msg string) {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return "", fmt.Sprintf("line %d: %s", pe.Position.Line, pe.Message)
	}
	if m := tableMismatchRE.FindStringSubmatch(err.Error()); m != nil {
		if k, uerr := strconv.Unquote(m[2]); uerr == nil {
			return k, fmt.Sprintf("must be a table (line %s)", m[1])
		}
	}
	return "", strings.TrimPrefix(err.Error(), "toml: ")
}

// loader collects problems while it builds the Config.
type loader struct {
	file     string
	problems []Problem
}

func (l *loader) add(key, format string, args ...any) {
	l.problems = append(l.problems, Problem{File: l.file, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (l *loader) err() error {
	if len(l.problems) == 0 {
		return nil
	}
	return &Error{Problems: l.problems}
}

// unknownKeys reports keys the schema does not have. Only the outermost
// unknown key of a subtree is reported: a misspelt table would otherwise
// drown the list in its own contents.
func (l *loader) unknownKeys(keys []toml.Key) {
	var reported []toml.Key
	for _, k := range keys {
		if slices.ContainsFunc(reported, func(r toml.Key) bool { return isPrefix(r, k) }) {
			continue
		}
		reported = append(reported, k)
		msg := "unknown key"
		if s := suggest(k); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		l.add(k.String(), "%s", msg)
	}
}

func isPrefix(prefix, k toml.Key) bool {
	return len(prefix) <= len(k) && slices.Equal(prefix, k[:len(prefix)])
}

// suggest returns the known key closest to an unknown one, if it is close
// enough to be a typo.
func suggest(k toml.Key) string {
	var table reflect.Type
	switch {
	case len(k) == 1:
		table = reflect.TypeFor[rawFile]()
	case len(k) == 2 && k[0] == "daemon":
		table = reflect.TypeFor[rawDaemon]()
	case len(k) == 3 && k[0] == "pools":
		table = reflect.TypeFor[rawPool]()
	case len(k) == 4 && k[0] == "pools" && k[2] == "source":
		table = reflect.TypeFor[rawSource]()
	case len(k) == 4 && k[0] == "pools" && k[2] == "limits":
		table = reflect.TypeFor[rawLimits]()
	default:
		return ""
	}
	unknown := k[len(k)-1]
	best, bestDist := "", 3 // at most two edits away
	for i := range table.NumField() {
		name := table.Field(i).Tag.Get("toml")
		d := editDistance(unknown, name)
		if strings.HasPrefix(name, unknown+"_") {
			d = 1 // a dropped unit, as in scale_down_window for scale_down_window_sec
		}
		if d < bestDist {
			best, bestDist = name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// The getters below copy a leaf into dst when it is present and of the right
// type, and report whether they did. A missing leaf leaves dst at its default;
// a mistyped one is a problem and also leaves the default, so that the range
// checks that follow do not pile a second complaint onto the same key.

func (l *loader) wrongType(key, want string, v value) {
	l.add(key, "must be %s, not %s", want, describe(v.raw))
}

func describe(raw any) string {
	switch raw.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return "a date or time"
}

func (l *loader) str(key string, v value, dst *string) bool {
	if !v.set() {
		return false
	}
	s, ok := v.raw.(string)
	if !ok {
		l.wrongType(key, "a string", v)
		return false
	}
	*dst = s
	return true
}

// integer accepts counts that fit in 32 bits: no pool needs more, and it
// keeps int conversions exact on every platform.
func (l *loader) integer(key string, v value, dst *int) bool {
	if !v.set() {
		return false
	}
	n, ok := v.raw.(int64)
	switch {
	case !ok:
		l.wrongType(key, "an integer", v)
		return false
	case n < math.MinInt32 || n > math.MaxInt32:
		l.add(key, "%d is out of range", n)
		return false
	}
	*dst = int(n)
	return true
}

// number accepts integers too: "threshold = 1" should not need a ".0".
func (l *loader) number(key string, v value, dst *float64) bool {
	if !v.set() {
		return false
	}
	var f float64
	switch n := v.raw.(type) {
	case int64:
		f = float64(n)
	case float64:
		f = n
	default:
		l.wrongType(key, "a number", v)
		return false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		l.add(key, "must be a finite number")
		return false
	}
	*dst = f
	return true
}

func (l *loader) seconds(key string, v value, dst *time.Duration) bool {
	f := dst.Seconds()
	if !l.number(key, v, &f) {
		return false
	}
	if math.Abs(f) > float64(math.MaxInt64)/float64(time.Second) {
		l.add(key, "%g seconds is too large", f)
		return false
	}
	*dst = time.Duration(math.Round(f * float64(time.Second)))
	return true
}

func (l *loader) strings(key string, v value, dst *[]string) bool {
	if !v.set() {
		return false
	}
	arr, ok := v.raw.([]any)
	if !ok {
		l.wrongType(key, "an array of strings", v)
		return false
	}
	out := make([]string, len(arr))
	good := true
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			l.add(key, "element %d must be a string, not %s", i+1, describe(e))
			good = false
		}
		out[i] = s
	}
	if good {
		*dst = out
	}
	return good
}

func (l *loader) stringMap(key string, v value, dst *map[string]string) bool {
	if !v.set() {
		return false
	}
	m, ok := v.raw.(map[string]any)
	if !ok {
		l.wrongType(key, "a table of strings", v)
		return false
	}
	out := make(map[string]string, len(m))
	good := true
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, ok := m[k].(string)
		if !ok {
			l.add(key+"."+toml.Key{k}.String(), "must be a string, not %s", describe(m[k]))
			good = false
		}
		out[k] = s
	}
	if good {
		*dst = out
	}
	return good
}

// pool builds and checks one [pools.NAME] table.
func (l *loader) pool(name string, r *rawPool, daemonPoll time.Duration) *Pool {
	key := func(parts ...string) string {
		return toml.Key(append([]string{"pools", name}, parts...)).String()
	}
	if !poolNameRE.MatchString(name) {
		l.add(key(), "pool name must match [a-z0-9_]{1,32}; it becomes part of unit names")
	}
	p := defaultPool(name, daemonPoll)

	l.command(p, r, key)
	l.identity(p, r, key)

	if l.integer(key("min_workers"), r.MinWorkers, &p.MinWorkers) && p.MinWorkers < 0 {
		l.add(key("min_workers"), "must be >= 0")
	}
	l.integer(key("max_workers"), r.MaxWorkers, &p.MaxWorkers)
	switch {
	case p.MaxWorkers < 1:
		l.add(key("max_workers"), "must be >= 1")
	case p.MaxWorkers < p.MinWorkers:
		l.add(key("max_workers"), "must be >= min_workers (%d)", p.MinWorkers)
	}
	if l.number(key("target_queue_depth_per_worker"), r.TargetQueueDepthPerWorker, &p.TargetQueueDepthPerWorker) &&
		p.TargetQueueDepthPerWorker < 1 {
		l.add(key("target_queue_depth_per_worker"), "must be >= 1")
	}
	if l.number(key("target_utilisation"), r.TargetUtilisation, &p.TargetUtilisation) &&
		!(p.TargetUtilisation > 0 && p.TargetUtilisation <= 1) {
		l.add(key("target_utilisation"), "must be in (0, 1]")
	}
	if l.integer(key("threads_per_worker"), r.ThreadsPerWorker, &p.ThreadsPerWorker) && p.ThreadsPerWorker < 1 {
		l.add(key("threads_per_worker"), "must be >= 1")
	}
	if l.number(key("target_cpu_utilisation"), r.TargetCPUUtilisation, &p.TargetCPUUtilisation) &&
		!(p.TargetCPUUtilisation > 0 && p.TargetCPUUtilisation <= 1) {
		l.add(key("target_cpu_utilisation"), "must be in (0, 1]; leave it out to turn the CPU signal off")
	}
	if l.number(key("cpu_per_worker"), r.CPUPerWorker, &p.CPUPerWorker) && p.CPUPerWorker <= 0 {
		l.add(key("cpu_per_worker"), "must be > 0")
	}
	if l.number(key("tolerance"), r.Tolerance, &p.Tolerance) && !(p.Tolerance >= 0 && p.Tolerance < 1) {
		l.add(key("tolerance"), "must be in [0, 1)")
	}
	for _, d := range []struct {
		name string
		v    value
		dst  *time.Duration
	}{
		{"scale_up_window_sec", r.ScaleUpWindowSec, &p.ScaleUpWindow},
		{"scale_down_window_sec", r.ScaleDownWindowSec, &p.ScaleDownWindow},
		{"drain_timeout_sec", r.DrainTimeoutSec, &p.DrainTimeout},
	} {
		if l.seconds(key(d.name), d.v, d.dst) && *d.dst < 0 {
			l.add(key(d.name), "must be >= 0")
		}
	}
	if l.seconds(key("poll_interval_sec"), r.PollIntervalSec, &p.PollInterval) && p.PollInterval < minPollInterval {
		l.add(key("poll_interval_sec"), "must be >= 0.1")
	}
	l.drainSignal(p, r, key)
	l.source(p, &r.Source, func(k string) string { return key("source", k) })
	l.limits(p, &r.Limits, func(k string) string { return key("limits", k) })
	return p
}

// command fills Exec from exec or from the app shortcut.
func (l *loader) command(p *Pool, r *rawPool, key func(...string) string) {
	switch {
	case r.App.set() && r.Exec.set():
		l.add(key("exec"), "set either exec or app, not both")
	case r.App.set():
		if l.str(key("app"), r.App, &p.App) {
			if p.App == "" {
				l.add(key("app"), "must not be empty")
				return
			}
			p.Exec = []string{"flexiq", "worker", "--app", p.App}
		}
	case !r.Exec.set():
		l.add(key("exec"), "missing: set exec (the worker command line) or app")
	default:
		var exec []string
		if !l.strings(key("exec"), r.Exec, &exec) {
			return
		}
		switch {
		case len(exec) == 0:
			l.add(key("exec"), "must not be empty")
		case exec[0] == "":
			l.add(key("exec"), "the command (first element) must not be empty")
		default:
			p.Exec = exec
		}
	}
}

// identity fills what the worker runs as and in.
func (l *loader) identity(p *Pool, r *rawPool, key func(...string) string) {
	if l.str(key("user"), r.User, &p.User) {
		p.UserExplicit = true
		if p.User == "" {
			l.add(key("user"), "must not be empty")
		}
	}
	p.Group = p.User
	if l.str(key("group"), r.Group, &p.Group) && p.Group == "" {
		l.add(key("group"), "must not be empty")
	}
	if l.str(key("working_directory"), r.WorkingDirectory, &p.WorkingDirectory) && !filepath.IsAbs(p.WorkingDirectory) {
		l.add(key("working_directory"), "must be an absolute path")
	}
	var env map[string]string
	if !l.stringMap(key("environment"), r.Environment, &env) {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		switch k := key("environment", name); {
		case !envNameRE.MatchString(name):
			l.add(k, "not a valid environment variable name")
		case slices.Contains(reservedEnv, name):
			l.add(k, "reserved: flexiq-scaled sets it on every worker")
		}
	}
	if len(env) > 0 {
		p.Environment = env
	}
}

func (l *loader) drainSignal(p *Pool, r *rawPool, key func(...string) string) {
	var written string
	if !l.str(key("drain_signal"), r.DrainSignal, &written) {
		return
	}
	name := strings.ToUpper(written)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	switch sig := unix.SignalNum(name); sig {
	case 0:
		l.add(key("drain_signal"), "unknown signal %q", written)
	case unix.SIGKILL, unix.SIGSTOP:
		l.add(key("drain_signal"), "%s cannot be caught, so workers could not drain", name)
	default:
		p.DrainSignal, p.DrainSignalNumber = name, int(sig)
	}
}

func (l *loader) source(p *Pool, r *rawSource, key func(string) string) {
	s := &p.Source
	known := true
	if l.str(key("type"), r.Type, &s.Type) && s.Type != SourceFlexiqSQLite && s.Type != SourceSQLiteQuery {
		l.add(key("type"), "unknown source type %q (want %q or %q)", s.Type, SourceFlexiqSQLite, SourceSQLiteQuery)
		known = false
	}
	switch {
	case !r.Path.set():
		l.add(key("path"), "missing: the database file to read")
	case l.str(key("path"), r.Path, &s.Path) && !filepath.IsAbs(s.Path):
		l.add(key("path"), "must be an absolute path")
	}

	if l.strings(key("queues"), r.Queues, &s.Queues) {
		if slices.Contains(s.Queues, "") {
			l.add(key("queues"), "queue names must not be empty")
		}
		if len(s.Queues) == 0 {
			s.Queues = nil // an empty filter means all queues, as an absent one does
		}
	}
	l.str(key("namespace"), r.Namespace, &s.Namespace)
	hasQuery := l.str(key("query"), r.Query, &s.Query)
	if !known {
		return // which keys belong depends on the type
	}
	if s.Type == SourceSQLiteQuery {
		for _, k := range []struct {
			name string
			v    value
		}{{"queues", r.Queues}, {"namespace", r.Namespace}} {
			if k.v.set() {
				l.add(key(k.name), "only for %s sources; filter in the query instead", SourceFlexiqSQLite)
			}
		}
		switch {
		case !r.Query.set():
			l.add(key("query"), "required for %s sources: a SELECT returning pending, running", SourceSQLiteQuery)
		case hasQuery && strings.TrimSpace(s.Query) == "":
			l.add(key("query"), "must not be empty")
		}
	} else if r.Query.set() {
		l.add(key("query"), "only for %s sources", SourceSQLiteQuery)
	}
}

func (l *loader) limits(p *Pool, r *rawLimits, key func(string) string) {
	lim := &p.Limits
	var quota string
	if l.str(key("cpu_quota"), r.CPUQuota, &quota) {
		if usec, ok := parseCPUQuota(quota); ok {
			lim.CPUQuota, lim.CPUQuotaPerSecUSec = quota, usec
		} else {
			l.add(key("cpu_quota"), `must be a percentage above 0, such as "50%%" or "200%%"`)
		}
	}

	if r.MemoryMax.set() {
		// A bare byte count may be written as an integer, as systemd allows.
		var mem string
		ok := true
		switch raw := r.MemoryMax.raw.(type) {
		case int64:
			mem = strconv.FormatInt(raw, 10)
		case string:
			mem = raw
		default:
			l.wrongType(key("memory_max"), "a string or an integer", r.MemoryMax)
			ok = false
		}
		if n, valid := parseSize(mem); valid {
			lim.MemoryMax, lim.MemoryMaxBytes = mem, n
		} else if ok {
			l.add(key("memory_max"), `must be a byte count above 0, optionally with a K, M, G or T suffix (base 1024), or "infinity"`)
		}
	}

	var tasks int
	if l.integer(key("tasks_max"), r.TasksMax, &tasks) {
		if tasks < 1 {
			l.add(key("tasks_max"), "must be >= 1")
		} else {
			lim.TasksMax = uint64(tasks)
		}
	}
}

// parseCPUQuota turns "N%" into systemd's CPUQuotaPerSecUSec: 100% is one
// CPU, 1s of CPU time per second.
func parseCPUQuota(s string) (uint64, bool) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok || !decimalRE.MatchString(num) {
		return 0, false
	}
	pct, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, false
	}
	usec := math.Round(pct * 10000)
	// Beyond a million CPUs the number is a typo, and far below float
	// precision or uint64 trouble.
	if usec < 1 || pct > 1e8 {
		return 0, false
	}
	return uint64(usec), true
}

// parseSize reads systemd's size syntax for MemoryMax=, base 1024.
func parseSize(s string) (uint64, bool) {
	if s == "infinity" {
		return math.MaxUint64, true
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return n, n > 0
	}
	if s == "" {
		return 0, false
	}
	unit := strings.IndexByte("KMGT", s[len(s)-1])
	num := s[:len(s)-1]
	if unit < 0 || !decimalRE.MatchString(num) {
		return 0, false
	}
	f, err := strconv.ParseFloat(num, 64)
	n := math.Round(f * math.Pow(1024, float64(unit+1)))
	if err != nil || n < 1 || n >= math.MaxUint64 {
		return 0, false
	}
	return uint64(n), true
}
