package config

import (
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// Source types of the SQLite family, which live in this file.
const (
	SourceFlexiqSQLite = "flexiq-sqlite" // flexiq's own task table
	SourceSQLiteQuery  = "sqlite-query"  // any SQLite file, via a SELECT returning pending, running
)

// A sourceKind is one source type as the loader knows it: the keys it takes
// besides type, and the checks that fill its settings. Each family of types
// registers its own from an init function in its own file, as KEDA's
// scalers do, so adding a type touches no other type's code.
type sourceKind struct {
	name string
	keys []string
	// check validates the type's keys and fills s. Only the keys in keys
	// are set when it runs: the others are reported before.
	check func(l *loader, s *Source, r *rawSource, key func(string) string)
}

var sourceKinds = map[string]sourceKind{}

func registerSource(k sourceKind) {
	if _, dup := sourceKinds[k.name]; dup {
		panic("config: source type registered twice: " + k.name)
	}
	sourceKinds[k.name] = k
}

// SourceTypes lists the registered source types, sorted.
func SourceTypes() []string { return slices.Sorted(maps.Keys(sourceKinds)) }

func init() {
	registerSource(sourceKind{name: SourceFlexiqSQLite, keys: []string{"path", "queues", "namespace"}, check: checkSQLite})
	registerSource(sourceKind{name: SourceSQLiteQuery, keys: []string{"path", "query"}, check: checkSQLite})
}

// source builds and checks the [pools.NAME.source] table.
func (l *loader) source(p *Pool, r *rawSource, key func(string) string) {
	s := &p.Source
	l.str(key("type"), r.Type, &s.Type)
	kind, known := sourceKinds[s.Type]
	if !known {
		l.add(key("type"), "unknown source type %q (want one of %s)", s.Type, strings.Join(SourceTypes(), ", "))
		return // which keys belong depends on the type
	}
	for _, k := range setKeys(r) {
		if k == "type" || slices.Contains(kind.keys, k) {
			continue
		}
		l.add(key(k), "only for %s sources, not %s", strings.Join(typesTaking(k), ", "), s.Type)
	}
	// The checks see only the keys their type takes.
	mine := *r
	clearKeys(&mine, kind.keys)
	kind.check(l, s, &mine, key)
}

// setKeys lists the keys written in a source table, by their TOML names.
func setKeys(r *rawSource) []string {
	var keys []string
	walkKeys(reflect.ValueOf(r).Elem(), func(name string, v *value) {
		if v.set() {
			keys = append(keys, name)
		}
	})
	return keys
}

// clearKeys unsets every key that is not in keep (type always stays).
func clearKeys(r *rawSource, keep []string) {
	walkKeys(reflect.ValueOf(r).Elem(), func(name string, v *value) {
		if name != "type" && !slices.Contains(keep, name) {
			*v = value{}
		}
	})
}

// walkKeys visits every value field of a raw table, embedded structs
// included, with its TOML key.
func walkKeys(v reflect.Value, fn func(name string, v *value)) {
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		switch {
		case sf.Anonymous && f.Kind() == reflect.Struct:
			walkKeys(f, fn)
		case f.Type() == reflect.TypeFor[value]():
			name, _, _ := strings.Cut(sf.Tag.Get("toml"), ",")
			fn(name, f.Addr().Interface().(*value))
		}
	}
}

// typesTaking lists the source types that take key.
func typesTaking(key string) []string {
	var types []string
	for _, name := range SourceTypes() {
		if slices.Contains(sourceKinds[name].keys, key) {
			types = append(types, name)
		}
	}
	return types
}

// checkSQLite checks the SQLite family: a database file, and for
// sqlite-query the query.
func checkSQLite(l *loader, s *Source, r *rawSource, key func(string) string) {
	switch {
	case !r.Path.set():
		l.add(key("path"), "missing: the database file to read")
	case !l.str(key("path"), r.Path, &s.Path):
	case !filepath.IsAbs(s.Path):
		l.add(key("path"), "must be an absolute path")
	default:
		// As written: the daemon would hold the pool at 0 for ever,
		// with the file there for everyone but itself to see. This
		// holds under `run --user` too, which has no such sandbox, so
		// that a file means the same to both managers. CheckPaths
		// follows the symlinks.
		if h, hidden := hiddenBy(filepath.Clean(s.Path)); hidden {
			l.add(key("path"), "%s is invisible to the daemon: %s", s.Path, h.explain())
		}
	}
	l.queues(s, r, key)
	l.str(key("namespace"), r.Namespace, &s.Namespace)
	if s.Type != SourceSQLiteQuery {
		return
	}
	hasQuery := l.str(key("query"), r.Query, &s.Query)
	switch {
	case !r.Query.set():
		l.add(key("query"), "required for %s sources: a SELECT returning pending, running", SourceSQLiteQuery)
	case hasQuery && strings.TrimSpace(s.Query) == "":
		l.add(key("query"), "must not be empty")
	}
}

// queues reads the queues key, shared by most types.
func (l *loader) queues(s *Source, r *rawSource, key func(string) string) {
	if l.strings(key("queues"), r.Queues, &s.Queues) {
		if slices.Contains(s.Queues, "") {
			l.add(key("queues"), "queue names must not be empty")
		}
		if len(s.Queues) == 0 {
			s.Queues = nil // an empty filter means all queues, as an absent one does
		}
	}
}
