package config

import "reflect"

// The settings of a source type are a struct of package source, which
// config's own tests cannot import; they read and write them by key.

func settingField(settings reflect.Value, key string) reflect.Value {
	var found reflect.Value
	settingsFields(settings, func(f reflect.StructField, v reflect.Value) {
		if settingsKey(f) == key {
			found = v
		}
	})
	if !found.IsValid() {
		panic("no source setting " + key + " in " + settings.Type().String())
	}
	return found
}

// hasSetting says whether s's settings have key.
func hasSetting(s Source, key string) bool {
	found := false
	settingsFields(reflect.ValueOf(s.Settings), func(f reflect.StructField, _ reflect.Value) {
		found = found || settingsKey(f) == key
	})
	return found
}

// setting is the value of key in s's settings.
func setting(s Source, key string) any {
	return settingField(reflect.ValueOf(s.Settings), key).Interface()
}

// withSetting returns s with key set to v, in a copy of its settings.
func withSetting(s Source, key string, v any) Source {
	c := reflect.New(reflect.TypeOf(s.Settings)).Elem()
	c.Set(reflect.ValueOf(s.Settings))
	settingField(c, key).Set(reflect.ValueOf(v))
	s.Settings = c.Interface()
	return s
}

// zeroSettings returns s with its settings' zero value, of the same type.
func zeroSettings(s Source) Source {
	s.Settings = reflect.Zero(reflect.TypeOf(s.Settings)).Interface()
	return s
}
