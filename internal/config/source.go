package config

import (
	"maps"
	"reflect"
	"slices"
	"strings"
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
func SourceTypes() []string { return allSourceTypes() }

// source builds and checks the [pools.NAME.source] table: its type, then
// the keys the type does not take, then the type's own checks, which see
// only its keys.
func (l *loader) source(p *Pool, r rawSourceTable, key func(string) string) {
	s := &p.Source
	l.str(key("type"), r["type"], &s.Type)
	t, typed := sourceTypes[s.Type]
	kind, known := sourceKinds[s.Type]
	if !known && !typed {
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
	if typed {
		l.decodeSource(s, t, mine, key)
		return
	}
	var old rawSource
	walkKeys(reflect.ValueOf(&old).Elem(), func(name string, v *value) { *v = mine[name] })
	kind.check(l, s, &old, key)
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
		if typeTakes(name, key) {
			types = append(types, name)
		}
	}
	return types
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
