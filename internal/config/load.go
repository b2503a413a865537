package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

const (
	defaultPollInterval = 5 * time.Second
	// Below this the daemon would spend its time polling SQLite and systemd.
	minPollInterval = 100 * time.Millisecond
)

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
	Daemon    rawDaemon    `toml:"daemon"`
	HostGuard rawHostGuard `toml:"host_guard"`
	Capacity  rawCapacity  `toml:"capacity"`
	// Prometheus is read by the source decoder's getters (prometheus.go).
	Prometheus rawSourceTable `toml:"prometheus"`
	// Fleet is read the same way (fleet_load.go).
	Fleet rawSourceTable     `toml:"fleet"`
	Pools map[string]rawPool `toml:"pools"`
}

type rawDaemon struct {
	PollIntervalSec value `toml:"poll_interval_sec"`
}

type rawPool struct {
	App                       value          `toml:"app"`
	Exec                      value          `toml:"exec"`
	User                      value          `toml:"user"`
	Group                     value          `toml:"group"`
	WorkingDirectory          value          `toml:"working_directory"`
	Environment               value          `toml:"environment"`
	EnvironmentFile           value          `toml:"environment_file"`
	Hardening                 value          `toml:"hardening"`
	MaxSurge                  value          `toml:"max_surge"`
	Mode                      value          `toml:"mode"`
	MinWorkers                value          `toml:"min_workers"`
	MaxWorkers                value          `toml:"max_workers"`
	TargetQueueDepthPerWorker value          `toml:"target_queue_depth_per_worker"`
	TargetUtilisation         value          `toml:"target_utilisation"`
	ThreadsPerWorker          value          `toml:"threads_per_worker"`
	ThreadsPerWorkerFallback  value          `toml:"threads_per_worker_fallback"`
	TargetCPUUtilisation      value          `toml:"target_cpu_utilisation"`
	TargetQueueLatencySec     value          `toml:"target_queue_latency_sec"`
	CPUPerWorker              value          `toml:"cpu_per_worker"`
	Tolerance                 value          `toml:"tolerance"`
	ScaleUpWindowSec          value          `toml:"scale_up_window_sec"`
	ScaleDownWindowSec        value          `toml:"scale_down_window_sec"`
	Demand                    value          `toml:"demand"`
	DemandWindowSec           value          `toml:"demand_window_sec"`
	OnsetMinJobs              value          `toml:"onset_min_jobs"`
	KeepWarmWorkers           value          `toml:"keep_warm_workers"`
	KeepWarmSec               value          `toml:"keep_warm_sec"`
	PollIntervalSec           value          `toml:"poll_interval_sec"`
	DrainTimeoutSec           value          `toml:"drain_timeout_sec"`
	DrainSignal               value          `toml:"drain_signal"`
	Requires                  value          `toml:"requires"`
	StartCondition            value          `toml:"start_condition"`
	QuietSignal               value          `toml:"quiet_signal"`
	QuietPeriodSec            value          `toml:"quiet_period_sec"`
	Service                   value          `toml:"service"`
	Wake                      value          `toml:"wake"` // misplaced: refused (service_wake.go)
	Source                    rawSourceTable `toml:"source"`
	Fleet                     rawSourceTable `toml:"fleet"`
	Limits                    rawLimits      `toml:"limits"`
	rawScaling
}

// rawSourceTable is [pools.NAME.source] as written: its leaves stay raw,
// for the registered type's Decode (sourcetype.go) to type and check. Not a
// toml.Primitive: as an Unmarshaler it can refuse a source that is not a
// table while the decoder still knows the line, and it outlives the
// MetaData of the file (a drop-in's) it came from. The decoder marks its keys
// decoded; decodeFile reports those that no type takes.
type rawSourceTable map[string]value

// notTable is rawSourceTable's complaint, which decodeProblem recognises.
const notTable = "flexiq-scaled: not a table"

// UnmarshalTOML implements toml.Unmarshaler.
func (t *rawSourceTable) UnmarshalTOML(data any) error {
	m, ok := data.(map[string]any)
	if !ok {
		return errors.New(notTable)
	}
	*t = make(rawSourceTable, len(m))
	for k, v := range m {
		(*t)[k] = value{raw: v}
	}
	return nil
}

type rawLimits struct {
	CPUQuota  value `toml:"cpu_quota"`
	MemoryMax value `toml:"memory_max"`
	TasksMax  value `toml:"tasks_max"`
}

// Load reads, defaults and validates the configuration at path, then the
// drop-ins of DropInDir(path) (dropin.go). Problems in the files come back
// together as an *Error, each naming its file; failing to read a file is a
// plain error wrapping the os error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	dropIns, err := readDropIns(DropInDir(path))
	if err != nil {
		return nil, err
	}
	return parseAll(path, data, dropIns)
}

func parse(path string, data []byte) (*Config, error) {
	return parseAll(path, data, nil)
}

// decodeFile decodes one file into raw, adding its syntax errors and unknown
// keys to l under the file's name. It returns the decoder's metadata, or
// false when the file could not be decoded at all.
func (l *loader) decodeFile(data []byte, raw *rawFile) (toml.MetaData, bool) {
	md, err := toml.Decode(string(data), raw)
	if err != nil {
		key, msg := decodeProblem(err)
		l.add(key, "%s", msg)
		return md, false
	}
	// The decoder silently skips a non-table where it expects a map, which
	// would turn "pools = 3" into a daemon with no pools.
	undecoded := md.Undecoded()
	if t := md.Type("pools"); t != "" && t != "Hash" {
		l.add("pools", "must be a table of pools, as in [pools.NAME]")
		// Nothing under it was decoded; one complaint is enough.
		undecoded = slices.DeleteFunc(undecoded, func(k toml.Key) bool { return k[0] == "pools" })
	}
	// The tables inside an array value (keys = [{ key = "q" }]) are the
	// value's to check: the decoder marks those of [[keys]] as decoded, not
	// those of an inline array, which its getter checks the same way.
	undecoded = slices.DeleteFunc(undecoded, func(k toml.Key) bool {
		for i := len(k) - 1; i > 0; i-- {
			if md.Type(k[:i]...) == "Array" {
				return true
			}
		}
		return false
	})
	l.unknownKeys(withUnknownSourceKeys(md, raw, undecoded))
	return md, true
}

func parseAll(path string, data []byte, dropIns []dropIn) (*Config, error) {
	return newLoader(path, MachineIDPath).parseAll(data, dropIns)
}

// parseAll is parseAll of the file l names, with the loader's settings
// (the machine id's path, which tests replace).
func (l *loader) parseAll(data []byte, dropIns []dropIn) (*Config, error) {
	path := l.file
	var raw rawFile
	if _, ok := l.decodeFile(data, &raw); !ok {
		// Drop-ins are still decoded, so that one run lists the
		// syntax errors of every file.
		l.mergeDropIns(&raw, dropIns)
		return nil, l.err()
	}
	origin := l.mergeDropIns(&raw, dropIns)

	c := &Config{
		Path:      path,
		Daemon:    Daemon{PollInterval: defaultPollInterval},
		Pools:     make(map[string]*Pool, len(raw.Pools)),
		PoolFiles: origin,
	}
	for _, d := range dropIns {
		c.DropIns = append(c.DropIns, d.path)
	}
	if l.seconds("daemon.poll_interval_sec", raw.Daemon.PollIntervalSec, &c.Daemon.PollInterval) &&
		c.Daemon.PollInterval < minPollInterval {
		l.add("daemon.poll_interval_sec", "must be >= 0.1")
	}
	c.HostGuard = l.hostGuard(raw.HostGuard, c.Daemon.PollInterval)
	l.capacity(&c.Capacity, &raw.Capacity)
	// Before the pools, whose rules' promql() may query it.
	c.Prometheus = l.prometheus(raw.Prometheus)
	l.prom = c.Prometheus
	// Before the pools too, whose fleet tables take its keys.
	c.Fleet = l.fleet.daemon(raw.Fleet)
	// Sorted, so that problems come out in the same order on every run.
	for _, name := range slices.Sorted(maps.Keys(raw.Pools)) {
		r := raw.Pools[name]
		// A pool's problems name the file that defines it.
		l.file = c.FileOf(name)
		c.Pools[name] = l.pool(name, &r, c.Daemon.PollInterval)
		l.file = path
	}
	l.svc.services(c)
	l.fleet.hostID(c)
	if err := l.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// withUnknownSourceKeys adds to undecoded the keys of the file's source
// tables that no source type takes, keeping the file's order (md.Keys).
func withUnknownSourceKeys(md toml.MetaData, raw *rawFile, undecoded []toml.Key) []toml.Key {
	unknown := map[string]bool{}
	for name, p := range raw.Pools {
		for k := range p.Source {
			if !isSourceKey(k) {
				unknown[toml.Key{"pools", name, "source", k}.String()] = true
			}
		}
	}
	if len(unknown) == 0 {
		return undecoded
	}
	seen := map[string]bool{}
	for _, k := range undecoded {
		seen[k.String()] = true
	}
	var out []toml.Key
	for _, k := range md.Keys() {
		if s := k.String(); seen[s] || unknown[s] {
			out = append(out, k)
		}
	}
	return out
}

// tableMismatchRE matches the decoder's complaint about a value where the
// schema has a table, e.g. source = "/x.db" for [pools.NAME.source].
var tableMismatchRE = regexp.MustCompile(`^toml: line (\d+) \(last key (".*")\): type mismatch for \S+: expected table but found`)

// decodeProblem turns a decoder error into a problem's key and message; either
// way the message carries the line.
func decodeProblem(err error) (key, msg string) {
	var pe toml.ParseError
	if errors.As(err, &pe) && pe.Message == notTable {
		return pe.LastKey, fmt.Sprintf("must be a table (line %d)", pe.Position.Line)
	}
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

// loader builds the Config from the file's tables, the daemon's and each
// pool's; the service tables are serviceLoader's, the fleet tables
// fleetLoader's. Problems go to its reader.
type loader struct {
	*reader
	// prom is the daemon-level [prometheus], for the pools' promql().
	prom  *Prometheus
	svc   *serviceLoader
	fleet *fleetLoader
}

// newLoader is a loader of file, whose fleet tables default host_id from
// machineIDPath (MachineIDPath, which tests replace).
func newLoader(file, machineIDPath string) *loader {
	r := &reader{file: file}
	return &loader{reader: r, svc: &serviceLoader{r}, fleet: &fleetLoader{reader: r, machineIDPath: machineIDPath}}
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
	case len(k) == 2 && k[0] == "host_guard":
		table = reflect.TypeFor[rawHostGuard]()
	case len(k) == 2 && k[0] == "capacity":
		table = reflect.TypeFor[rawCapacity]()
	case len(k) == 3 && k[0] == "pools":
		table = reflect.TypeFor[rawPool]()
	case len(k) == 4 && k[0] == "pools" && k[2] == "source":
		return closest(k[3], sourceKeyNames())
	case len(k) == 4 && k[0] == "pools" && k[2] == "limits":
		table = reflect.TypeFor[rawLimits]()
	default:
		return ""
	}
	var names []string
	// Visible fields, so that the keys of embedded families count.
	for _, f := range reflect.VisibleFields(table) {
		if name := f.Tag.Get("toml"); name != "" {
			names = append(names, name)
		}
	}
	return closest(k[len(k)-1], names)
}

// closest returns the name closest to unknown, if it is close enough to be
// a typo.
func closest(unknown string, names []string) string {
	best, bestDist := "", 3 // at most two edits away
	for _, name := range names {
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
