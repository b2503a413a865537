package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// DefaultSourceType is the type of a pool whose source table names none.
const DefaultSourceType = "flexiq-sqlite"

// A SourceType is one source type as its own file in internal/source
// declares it: its keys, documented, and the checks that turn the table into
// its settings. The file registers it once, from an init function, with the
// opener beside it; config keeps no list of types of its own and so never
// imports the package that implements them.
type SourceType struct {
	// Name is what type = "..." says, e.g. "flexiq-sqlite".
	Name string
	// Doc is one paragraph for the type's table in the reference.
	Doc string
	// Keys are the keys the type takes besides type, in the order the
	// reference lists them. Any other key of the table is refused before
	// Decode runs.
	Keys []KeyDoc
	// Decode checks the table through d and returns the type's settings, a
	// struct value comparable with reflect.DeepEqual (reload diffs) whose
	// exported fields carry their keys as toml tags (WriteEffective, Diff).
	// With problems (reported to d), what it returns is only read by the
	// checks that follow; the configuration is refused anyway.
	Decode func(d *SourceDecoder) any
	// Threads says the type can read threads_per_worker = "auto" from
	// flexiq's live workers.
	Threads bool
	// PromQL says the type's settings are a PromQLSource: trigger rules
	// may use promql() against its server.
	PromQL bool
	// Demand says the type reads arrivals and service times, for
	// demand = "littles-law".
	Demand bool
}

// LocalFile is implemented by the settings of a type that reads a file on
// this machine (a SQLite database): hostcheck.CheckPaths follows its
// symlinks, and hostcheck.Warnings says when it does not exist yet.
type LocalFile interface {
	// LocalFile returns the file's key in the table and its path.
	LocalFile() (key, path string)
}

// localFile is the file s reads, if any.
func localFile(s Source) (key, path string, ok bool) {
	if f, is := s.Settings.(LocalFile); is {
		key, path = f.LocalFile()
		return key, path, path != ""
	}
	return "", "", false
}

var sourceTypes = map[string]SourceType{}

// RegisterSourceType adds a source type. It panics on a name registered
// twice: two files claiming one type is a build mistake.
func RegisterSourceType(t SourceType) {
	if _, dup := sourceTypes[t.Name]; dup {
		panic("config: source type registered twice: " + t.Name)
	}
	sourceTypes[t.Name] = t
}

// SourceTypeDocs documents the table of each registered type, sorted by
// name, for the generated reference.
func SourceTypeDocs() []TableDoc {
	var docs []TableDoc
	for _, name := range SourceTypes() {
		t := sourceTypes[name]
		typ := KeyDoc{Name: "type", Type: "string", Required: true, Limits: fmt.Sprintf("%q", name), Doc: "The source type."}
		if name == DefaultSourceType {
			typ.Required, typ.Default = false, fmt.Sprintf("%q", name)
		}
		keys := append([]KeyDoc{typ}, t.Keys...)
		// Each type's page is docs/sources/TYPE.md, by convention rather
		// than by a table, so that a new type needs no entry anywhere
		// else: TestDocsLinks fails when a type has no page.
		doc := fmt.Sprintf("%s How to set it up: [docs/sources/%s.md](sources/%s.md).", t.Doc, name, name)
		docs = append(docs, TableDoc{Name: "pools.NAME.source", Title: fmt.Sprintf("`type = %q`", name), Doc: doc, Keys: keys})
	}
	return docs
}

func (t SourceType) keyNames() []string {
	names := make([]string, len(t.Keys))
	for i, k := range t.Keys {
		names[i] = k.Name
	}
	return names
}

// SourceTypes lists the registered source types, sorted.
func SourceTypes() []string { return slices.Sorted(maps.Keys(sourceTypes)) }

// source builds and checks the [pools.NAME.source] table: its type, then
// the keys the type does not take, then the type's own checks, which see
// only its keys.
func (l *loader) source(p *Pool, r rawSourceTable, key func(string) string) {
	s := &p.Source
	s.Type = defaultSourceType(p, r)
	l.str(key("type"), r["type"], &s.Type)
	t, known := sourceTypes[s.Type]
	if !known {
		l.add(key("type"), "unknown source type %q (want one of %s)", s.Type, strings.Join(SourceTypes(), ", "))
		return // which keys belong depends on the type
	}
	mine := rawSourceTable{}
	for _, k := range slices.Sorted(maps.Keys(r)) {
		switch {
		case k == "type":
		case typeTakes(s.Type, k):
			mine[k] = r[k]
		case isSourceKey(k):
			l.add(key(k), "only for %s sources, not %s", strings.Join(typesTaking(k), ", "), s.Type)
		}
		// Keys no type takes were reported with the file's unknown keys.
	}
	d := &SourceDecoder{l: l.reader, typ: s.Type, key: key, keys: mine}
	// Kept even with problems, as the fields of the old Source were: the
	// checks that follow (trigger rules) read what could be read.
	s.Settings = t.Decode(d)
}

// typesTaking lists the source types that take key.
func typesTaking(key string) []string {
	var types []string
	for _, name := range SourceTypes() {
		if typeTakes(name, key) {
			types = append(types, name)
		}
	}
	return types
}

// SourceDecoder is what a source type's Decode reads its table through. Its
// getters copy a key into dst when it is written and of the right type, and
// report whether they did; a wrong type is reported under the key's full
// name, "pools.NAME.source.KEY", as every other problem of the file is.
type SourceDecoder struct {
	l    *reader
	typ  string
	key  func(string) string
	keys map[string]value
}

// Type is the source type being decoded.
func (d *SourceDecoder) Type() string { return d.typ }

// Has says whether key is written in the table.
func (d *SourceDecoder) Has(key string) bool { return d.keys[key].set() }

// Errorf reports a problem with key.
func (d *SourceDecoder) Errorf(key, format string, args ...any) {
	d.l.add(d.key(key), format, args...)
}

// SubErrorf reports a problem with sub, a key of the table that key holds:
// "pools.NAME.source.KEY.SUB", sub as written.
func (d *SourceDecoder) SubErrorf(key, sub, format string, args ...any) {
	d.l.add(d.key(key)+"."+sub, format, args...)
}

// String reads a string.
func (d *SourceDecoder) String(key string, dst *string) bool {
	return d.l.str(d.key(key), d.keys[key], dst)
}

// Strings reads an array of strings.
func (d *SourceDecoder) Strings(key string, dst *[]string) bool {
	return d.l.strings(d.key(key), d.keys[key], dst)
}

// Int reads an integer that fits in 32 bits.
func (d *SourceDecoder) Int(key string, dst *int) bool {
	return d.l.integer(d.key(key), d.keys[key], dst)
}

// Number reads a finite number, integers included.
func (d *SourceDecoder) Number(key string, dst *float64) bool {
	return d.l.number(d.key(key), d.keys[key], dst)
}

// Seconds reads a number of seconds.
func (d *SourceDecoder) Seconds(key string, dst *time.Duration) bool {
	return d.l.seconds(d.key(key), d.keys[key], dst)
}

// StringMap reads a table of strings.
func (d *SourceDecoder) StringMap(key string, dst *map[string]string) bool {
	return d.l.stringMap(d.key(key), d.keys[key], dst)
}

// Key is key's full name in the file, as problems name it:
// "pools.NAME.source.KEY".
func (d *SourceDecoder) Key(key string) string { return d.key(key) }

// Names lists the keys written in the table, sorted.
func (d *SourceDecoder) Names() []string {
	var names []string
	for k, v := range d.keys {
		if v.set() {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// WrongType reports that key holds something else than want ("an array of
// tables"), saying what it holds.
func (d *SourceDecoder) WrongType(key, want string) {
	d.l.wrongType(d.key(key), want, d.keys[key])
}

// Item decodes element i of the array of tables under key: its problems
// are named "pools.NAME.source.KEY[i].SUBKEY".
func (d *SourceDecoder) Item(key string, i int, table map[string]any) *SourceDecoder {
	keys := make(map[string]value, len(table))
	for k, v := range table {
		keys[k] = value{raw: v}
	}
	full := fmt.Sprintf("%s[%d]", d.key(key), i)
	return &SourceDecoder{l: d.l, typ: d.typ, keys: keys, key: func(k string) string { return full + "." + k }}
}

// Describe names what a raw TOML value is ("a string", "an array"), for a
// type's own messages about a value of the wrong kind.
func Describe(raw any) string { return describe(raw) }

// EditDistance is the Levenshtein distance between a and b, for a type
// that suggests the key an unknown one was meant to be.
func EditDistance(a, b string) int { return editDistance(a, b) }

// Raw is key's value as the TOML decoder found it (nil when absent), for a
// type whose key takes more than one shape.
func (d *SourceDecoder) Raw(key string) any { return d.keys[key].raw }

// Queues reads the queues key that most types share: queue names, none
// empty; an empty list is no filter, as an absent one is (nil).
func (d *SourceDecoder) Queues(dst *[]string) {
	if d.Strings("queues", dst) {
		if slices.Contains(*dst, "") {
			d.Errorf("queues", "queue names must not be empty")
		}
		if len(*dst) == 0 {
			*dst = nil
		}
	}
}

// LocalFile reads key as the absolute path of a file the daemon reads, and
// refuses one that the daemon's sandbox hides (hidden.go). what says what the
// file is, for the problem of a missing key.
func (d *SourceDecoder) LocalFile(key, what string, dst *string) {
	switch {
	case !d.Has(key):
		d.Errorf(key, "missing: %s", what)
	case !d.String(key, dst):
	case !filepath.IsAbs(*dst):
		d.Errorf(key, "must be an absolute path")
	default:
		// As written: the daemon would hold the pool at 0 for ever,
		// with the file there for everyone but itself to see. This
		// holds under `run --user` too, which has no such sandbox, so
		// that a file means the same to both managers.
		// hostcheck.CheckPaths follows the symlinks.
		if h, hidden := hiddenBy(filepath.Clean(*dst)); hidden {
			d.Errorf(key, "%s is invisible to the daemon: %s", *dst, h.explain())
		}
	}
}

// Hidden says whether the daemon's sandbox hides path (hidden.go), and why,
// for a file that the daemon itself opens or runs.
func (d *SourceDecoder) Hidden(path string) (why string, hidden bool) {
	h, hidden := hiddenBy(filepath.Clean(path))
	if !hidden {
		return "", false
	}
	return fmt.Sprintf(h.reason, h.dir), true
}

// threadsSources lists the types that can read threads_per_worker = "auto".
func threadsSources() []string {
	var names []string
	for _, name := range SourceTypes() {
		if sourceTypes[name].Threads {
			names = append(names, name)
		}
	}
	return names
}

// PromQLSource is implemented by the settings of a type that serves the
// promql() of trigger rules (rules.go).
type PromQLSource interface {
	// PromQLScrapeInterval is the server's scrape interval, against which
	// range windows are checked; 0 means DefaultScrapeInterval.
	PromQLScrapeInterval() time.Duration
}

// promQLSources names the types whose settings serve promql(), quoted.
func promQLSources() string {
	var names []string
	for _, name := range SourceTypes() {
		if sourceTypes[name].PromQL {
			names = append(names, fmt.Sprintf("%q", name))
		}
	}
	return strings.Join(names, " or ")
}

// demandSources names the types that can feed demand = "littles_law",
// quoted.
func demandSources() string {
	var names []string
	for _, name := range SourceTypes() {
		if sourceTypes[name].Demand {
			names = append(names, fmt.Sprintf("%q", name))
		}
	}
	return strings.Join(names, " or ")
}

// isSourceKey says whether any source type takes key (type included).
func isSourceKey(key string) bool {
	return key == "type" || len(typesTaking(key)) > 0
}

// sourceKeyNames lists every key a source table may hold, sorted.
func sourceKeyNames() []string {
	names := []string{"type"}
	for _, t := range sourceTypes {
		names = append(names, t.keyNames()...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// typeTakes says whether source type name takes key.
func typeTakes(name, key string) bool {
	return slices.Contains(sourceTypes[name].keyNames(), key)
}
