package config

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/BurntSushi/toml"
)

// The getters below copy a leaf into dst when it is present and of the right
// type, and report whether they did. A missing leaf leaves dst at its default;
// a mistyped one is a problem and also leaves the default, so that the range
// checks that follow do not pile a second complaint onto the same key.

func (r *reader) wrongType(key, want string, v value) {
	r.add(key, "must be %s, not %s", want, describe(v.raw))
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

func (r *reader) str(key string, v value, dst *string) bool {
	if !v.set() {
		return false
	}
	s, ok := v.raw.(string)
	if !ok {
		r.wrongType(key, "a string", v)
		return false
	}
	*dst = s
	return true
}

// integer accepts counts that fit in 32 bits: no pool needs more, and it
// keeps int conversions exact on every platform.
func (r *reader) integer(key string, v value, dst *int) bool {
	if !v.set() {
		return false
	}
	n, ok := v.raw.(int64)
	switch {
	case !ok:
		r.wrongType(key, "an integer", v)
		return false
	case n < math.MinInt32 || n > math.MaxInt32:
		r.add(key, "%d is out of range", n)
		return false
	}
	*dst = int(n)
	return true
}

// number accepts integers too: "threshold = 1" should not need a ".0".
func (r *reader) number(key string, v value, dst *float64) bool {
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
		r.wrongType(key, "a number", v)
		return false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		r.add(key, "must be a finite number")
		return false
	}
	*dst = f
	return true
}

func (r *reader) seconds(key string, v value, dst *time.Duration) bool {
	f := dst.Seconds()
	if !r.number(key, v, &f) {
		return false
	}
	if math.Abs(f) > float64(math.MaxInt64)/float64(time.Second) {
		r.add(key, "%g seconds is too large", f)
		return false
	}
	*dst = time.Duration(math.Round(f * float64(time.Second)))
	return true
}

func (r *reader) strings(key string, v value, dst *[]string) bool {
	if !v.set() {
		return false
	}
	arr, ok := v.raw.([]any)
	if !ok {
		r.wrongType(key, "an array of strings", v)
		return false
	}
	out := make([]string, len(arr))
	good := true
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			r.add(key, "element %d must be a string, not %s", i+1, describe(e))
			good = false
		}
		out[i] = s
	}
	if good {
		*dst = out
	}
	return good
}

func (r *reader) stringMap(key string, v value, dst *map[string]string) bool {
	if !v.set() {
		return false
	}
	m, ok := v.raw.(map[string]any)
	if !ok {
		r.wrongType(key, "a table of strings", v)
		return false
	}
	out := make(map[string]string, len(m))
	good := true
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, ok := m[k].(string)
		if !ok {
			r.add(key+"."+toml.Key{k}.String(), "must be a string, not %s", describe(m[k]))
			good = false
		}
		out[k] = s
	}
	if good {
		*dst = out
	}
	return good
}
