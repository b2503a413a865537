package config

import (
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

// source builds and checks the [pools.NAME.source] table.
func (l *loader) source(p *Pool, r *rawSource, key func(string) string) {
	s := &p.Source
	l.str(key("type"), r.Type, &s.Type)
	t, typed := sourceTypes[s.Type]
	kind, known := sourceKinds[s.Type]
	if !known && !typed {
		l.add(key("type"), "unknown source type %q (want one of %s)", s.Type, strings.Join(SourceTypes(), ", "))
		return // which keys belong depends on the type
	}
	for _, k := range setKeys(r) {
		if k == "type" || typeTakes(s.Type, k) {
			continue
		}
		l.add(key(k), "only for %s sources, not %s", strings.Join(typesTaking(k), ", "), s.Type)
	}
	if typed {
		l.decodeSource(s, t, r, key)
		return
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

// rawValue is key's value in a raw source table.
func rawValue(r *rawSource, key string) value {
	var found value
	walkKeys(reflect.ValueOf(r).Elem(), func(name string, v *value) {
		if name == key {
			found = *v
		}
	})
	return found
}
