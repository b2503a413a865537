package config

import (
	"reflect"
	"slices"
	"strings"
	"time"
)

// A source type's settings are a struct of its own package; config reads
// them by reflection, through the toml tags of their exported fields, to
// write them out (WriteEffective) and to name what a reload changed (Diff).
// An embedded struct's fields are keys of the table itself, as Conn's are.

// settingsFields visits the exported fields of settings with their keys.
func settingsFields(v reflect.Value, fn func(f reflect.StructField, v reflect.Value)) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case !f.IsExported():
		case f.Anonymous && f.Type.Kind() == reflect.Struct:
			settingsFields(v.Field(i), fn)
		case settingsKey(f) != "":
			fn(f, v.Field(i))
		}
	}
}

func settingsKey(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// effectiveSourceOf is the source table as WriteEffective writes it: type,
// then the settings' keys.
func effectiveSourceOf(s Source) any {
	return effectiveOf(s.Settings, []effectiveField{{"Type", `toml:"type"`, s.Type}})
}

// effectiveField is a key that effectiveOf writes before the settings'.
type effectiveField struct {
	name, tag string
	value     any
}

// effectiveOf is a table of settings (a source type's, a fleet's) as
// WriteEffective writes it: the lead keys, then the settings' keys in their
// declared order, each with its tag (omitempty and all), but those in skip;
// a time.Duration is written in seconds.
func effectiveOf(settings any, lead []effectiveField, skip ...string) any {
	var fields []reflect.StructField
	var values []reflect.Value
	for _, f := range lead {
		v := reflect.ValueOf(f.value)
		fields = append(fields, reflect.StructField{Name: f.name, Type: v.Type(), Tag: reflect.StructTag(f.tag)})
		values = append(values, v)
	}
	if settings != nil {
		settingsFields(reflect.ValueOf(settings), func(f reflect.StructField, fv reflect.Value) {
			if slices.Contains(skip, settingsKey(f)) {
				return
			}
			if f.Type == reflect.TypeFor[time.Duration]() {
				// As every duration of the file: seconds, fractions kept.
				fv = reflect.ValueOf(fv.Interface().(time.Duration).Seconds())
			}
			fields = append(fields, reflect.StructField{Name: f.Name, Type: fv.Type(), Tag: f.Tag})
			values = append(values, fv)
		})
	}
	out := reflect.New(reflect.StructOf(fields)).Elem()
	for i, fv := range values {
		out.Field(i).Set(fv)
	}
	return out.Interface()
}

// diffSettings names the keys whose values differ between two settings
// structs; when their types differ, every key either one sets.
func diffSettings(a, b any, prefix string) []string {
	var keys []string
	if a != nil && b != nil && reflect.TypeOf(a) == reflect.TypeOf(b) {
		va := map[string]reflect.Value{}
		settingsFields(reflect.ValueOf(a), func(f reflect.StructField, v reflect.Value) { va[settingsKey(f)] = v })
		settingsFields(reflect.ValueOf(b), func(f reflect.StructField, v reflect.Value) {
			if !sameValue(va[settingsKey(f)], v) {
				keys = append(keys, prefix+settingsKey(f))
			}
		})
		return keys
	}
	for _, s := range []any{a, b} {
		if s == nil {
			continue
		}
		settingsFields(reflect.ValueOf(s), func(f reflect.StructField, v reflect.Value) {
			if !v.IsZero() {
				keys = append(keys, prefix+settingsKey(f))
			}
		})
	}
	return keys
}
