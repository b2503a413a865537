package config

import (
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// Diff names the keys of a pool's table whose effective values differ
// between old and new, sorted and without duplicates, e.g.
// ["max_workers", "source.path"]. Nil means nothing changed. The reload
// reports it, so that an admin sees what a reload did (or that it did
// nothing).
//
// It reflects over Pool, so that a field added later is compared without
// anyone remembering to add it here; its key is then its toml tag's, as
// WriteEffective writes it, or else the field's name in snake_case, unless
// keyNames says otherwise.
func Diff(old, new *Pool) []string {
	return diffTables(old, new, "(pool added or removed)", "")
}

// diffTables names the keys that differ between two tables that may be
// missing, prefixed; whole when only one of them is there.
func diffTables[T any](a, b *T, whole, prefix string) []string {
	if a == nil || b == nil {
		if a == b {
			return nil
		}
		return []string{whole}
	}
	return diffStruct(reflect.ValueOf(*a), reflect.ValueOf(*b), prefix)
}

// DiffDaemon names the keys of the [daemon] table that differ.
func DiffDaemon(old, new *Daemon) []string {
	return diffStruct(reflect.ValueOf(*old), reflect.ValueOf(*new), "daemon.")
}

// flattened marks, in keyNames, a struct whose fields are keys of the
// enclosing table, as Pool.Scaling's are.
const flattened = "."

// keyNames maps a field (by "Struct.Field") to its key in the file where
// snake_case of the field's name is not it: durations carry a _sec suffix,
// and fields derived from a key report that key. "" skips a field that is
// not a setting at all.
var keyNames = map[string]string{
	"Pool.Name":                 "",
	"Pool.ThreadsAuto":          "threads_per_worker",
	"Pool.UserExplicit":         "user",
	"Pool.ScaleUpWindow":        "scale_up_window_sec",
	"Pool.ScaleDownWindow":      "scale_down_window_sec",
	"Pool.DemandWindow":         "demand_window_sec",
	"Pool.KeepWarm":             "keep_warm_sec",
	"Pool.PollInterval":         "poll_interval_sec",
	"Pool.DrainTimeout":         "drain_timeout_sec",
	"Pool.DrainSignalNumber":    "drain_signal",
	"Pool.EnvironmentFiles":     "environment_file",
	"Pool.QuietSignalNumber":    "quiet_signal",
	"Pool.QuietPeriod":          "quiet_period_sec",
	"Daemon.PollInterval":       "poll_interval_sec",
	"Limits.CPUQuotaPerSecUSec": "cpu_quota",
	"Limits.MemoryMaxBytes":     "memory_max",
	"Service.DrainPeriod":       "drain_period_sec",
	"Service.ReadyTimeout":      "ready_timeout_sec",
	"Service.UnreadyTimeout":    "unready_timeout_sec",
	"Service.CPUSetSplit":       "cpuset_split",
	"Wake.HoldTimeout":          "hold_timeout_sec",
	"Readiness.Kind":            "type",
	"Readiness.Probe":           flattened,
	"Spec.Kind":                 "", // Readiness.Kind
	"Spec.InitialDelay":         "initial_delay_sec",
	"Spec.Period":               "period_sec",
	"Spec.Timeout":              "timeout_sec",
	// Fleets: the store's connection keys and the timings are the
	// table's own (their toml tags name them).
	"PoolFleet.Fleet":        flattened,
	"PoolFleet.CapacityAuto": "capacity",
	"Fleet.Conn":             flattened,
}

func diffStruct(a, b reflect.Value, prefix string) []string {
	var keys []string
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key, known := keyNames[t.Name()+"."+f.Name]
		if _, tagged := f.Tag.Lookup("toml"); !known && tagged {
			// A settings struct's field, which WriteEffective writes
			// under its tag ("-": not a key).
			key, known = settingsKey(f), true
		}
		if !known {
			key = snakeCase(f.Name)
		}
		if key == "" {
			continue
		}
		fa, fb := a.Field(i), b.Field(i)
		if t.Name() == "Source" && f.Name == "Settings" {
			keys = append(keys, diffSettings(fa.Interface(), fb.Interface(), prefix)...)
			continue
		}
		if f.Type == reflect.TypeFor[*Service]() {
			keys = append(keys, diffService(fa.Interface().(*Service), fb.Interface().(*Service), prefix+key)...)
			continue
		}
		if f.Type == reflect.TypeFor[*PoolFleet]() {
			keys = append(keys, diffPoolFleet(fa.Interface().(*PoolFleet), fb.Interface().(*PoolFleet), prefix+key)...)
			continue
		}
		if key == flattened {
			// A family of source settings: its keys are the table's own.
			keys = append(keys, diffStruct(fa, fb, prefix)...)
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
			// A sub-table ([pools.NAME.source], .limits): name its keys.
			keys = append(keys, diffStruct(fa, fb, prefix+key+".")...)
			continue
		}
		if !sameValue(fa, fb) {
			keys = append(keys, prefix+key)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// diffPoolFleet names the keys of [pools.NAME.fleet] that differ; key
// itself when the pool joined or left.
func diffPoolFleet(a, b *PoolFleet, key string) []string {
	return diffTables(a, b, key, key+".")
}

// sameValue is reflect.DeepEqual, except that an empty map or slice equals a
// nil one: "environment = {}" and no environment are the same setting.
func sameValue(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Map, reflect.Slice:
		if a.Len() == 0 && b.Len() == 0 {
			return true
		}
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// snakeCase turns a Go field name into a key: WorkingDirectory →
// working_directory, EnvironmentFile → environment_file, CPUQuota →
// cpu_quota.
func snakeCase(name string) string {
	var sb strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			// A word starts at an upper-case letter that follows a
			// lower-case one, or that ends an acronym (the P of CPUPer).
			if i > 0 && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1]))) {
				sb.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		sb.WriteRune(r)
	}
	return sb.String()
}
