package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDiff(t *testing.T) {
	base := func(t *testing.T) *Pool {
		t.Helper()
		cfg, err := load(t, pool(`environment = { A = "1" }`))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Pools["email"]
	}
	tests := []struct {
		name   string
		change func(p *Pool)
		want   []string
	}{
		{"nothing", func(p *Pool) {}, nil},
		{"bound", func(p *Pool) { p.MaxWorkers++ }, []string{"max_workers"}},
		{"two bounds", func(p *Pool) { p.MaxWorkers++; p.MinWorkers++ }, []string{"max_workers", "min_workers"}},
		{"duration gets its _sec key", func(p *Pool) { p.PollInterval = 7 * time.Second }, []string{"poll_interval_sec"}},
		{"windows", func(p *Pool) { p.ScaleDownWindow++; p.ScaleUpWindow++ }, []string{"scale_down_window_sec", "scale_up_window_sec"}},
		{"derived field reports its key once", func(p *Pool) { p.DrainSignal, p.DrainSignalNumber = "SIGINT", 2 }, []string{"drain_signal"}},
		{"acronym", func(p *Pool) { p.TargetCPUUtilisation = 0.5 }, []string{"target_cpu_utilisation"}},
		{"environment value", func(p *Pool) { p.Environment = map[string]string{"A": "2"} }, []string{"environment"}},
		{"environment emptied", func(p *Pool) { p.Environment = nil }, []string{"environment"}},
		{"exec argument", func(p *Pool) { p.Exec = append(slices.Clone(p.Exec), "-v") }, []string{"exec"}},
		{"app and its exec", func(p *Pool) { p.App = "other:q"; p.Exec = []string{"flexiq", "worker", "--app", "other:q"} }, []string{"app", "exec"}},
		{"source sub-table", func(p *Pool) { p.Source = withSetting(p.Source, "path", "/var/lib/x.db") }, []string{"source.path"}},
		{"source queues", func(p *Pool) { p.Source = withSetting(p.Source, "queues", []string{"a"}) }, []string{"source.queues"}},
		{"limits sub-table", func(p *Pool) { p.Limits.MemoryMax, p.Limits.MemoryMaxBytes = "1G", 1<<30 }, []string{"limits.memory_max"}},
		{"limits tasks", func(p *Pool) { p.Limits.TasksMax = 9 }, []string{"limits.tasks_max"}},
		{"user written explicitly", func(p *Pool) { p.UserExplicit = !p.UserExplicit }, []string{"user"}},
		{"name is not a setting", func(p *Pool) { p.Name = "other" }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old, new := base(t), base(t)
			tc.change(new)
			if got := Diff(old, new); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Diff = %q, want %q", got, tc.want)
			}
			// Symmetric: a change back is the same keys.
			if got := Diff(new, old); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("reverse Diff = %q, want %q", got, tc.want)
			}
		})
	}
}

// An empty map or slice is the same setting as none.
func TestDiffEmptyEqualsNil(t *testing.T) {
	a := &Pool{Environment: map[string]string{}, Exec: []string{}}
	b := &Pool{}
	if got := Diff(a, b); got != nil {
		t.Errorf("Diff = %q, want nothing", got)
	}
}

// Every field of Pool, when changed, is reported under a key that the file
// really has (as the effective config prints it), so that a field added
// later cannot be silently ignored by the reload's report, nor reported
// under a made-up name.
func TestDiffCoversEveryField(t *testing.T) {
	valid := map[string]bool{}
	var collect func(t reflect.Type, prefix string)
	collect = func(t reflect.Type, prefix string) {
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		for i := range t.NumField() {
			f := t.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if f.Anonymous {
				collect(f.Type, prefix) // an embedded family: its keys are the table's
				continue
			}
			if key == "source" {
				valid["source.type"] = true // the settings' keys: TestDiffSourceSettings
				continue
			}
			if ft := f.Type; ft.Kind() == reflect.Struct || (ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct) {
				collect(ft, prefix+key+".")
				continue
			}
			valid[prefix+key] = true
		}
	}
	collect(reflect.TypeOf(effectivePool{}), "")
	// The daemon's [prometheus], which a pool whose promql() uses it keeps:
	// a reload that changes it reports, and updates, those pools.
	valid["prometheus"] = true

	var walk func(v reflect.Value, path string)
	pt := reflect.TypeOf(Pool{})
	walk = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			fv := v.Field(i)
			name := path + f.Name
			if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == pt.PkgPath() {
				walk(fv, name+".")
				continue
			}
			if name == "Name" {
				continue
			}
			if name == "Source.Settings" {
				continue // TestDiffSourceSettings
			}
			if name == "Service" {
				continue // TestDiffServiceCoversEveryField
			}
			if name == "Fleet" {
				continue // TestDiffPoolFleetCoversEveryField
			}
			old, new := &Pool{}, &Pool{}
			setNonZero(t, reflect.ValueOf(new).Elem().FieldByIndex(fieldIndex(pt, name)), name)
			got := Diff(old, new)
			if len(got) != 1 || !valid[got[0]] {
				t.Errorf("changing Pool.%s: Diff = %q, want one key of the file", name, got)
			}
		}
	}
	walk(reflect.ValueOf(Pool{}), "")
}

// Every key of a registered source type's settings, when changed, is
// reported as that key of the source table, and one the type takes.
func TestDiffSourceSettings(t *testing.T) {
	types := []struct{ name, table string }{
		{"flexiq-sqlite", `path = "/var/lib/q.db"`},
		{"sqlite-query", `path = "/var/lib/q.db"` + "\nquery = \"SELECT 1, 1\""},
		{"command", `command = ["/usr/bin/q"]`},
		{"prometheus", `url = "http://h"` + "\npending_query = \"q\""},
		{"redis", `url = "redis://h"` + "\nkeys = [{ key = \"q\" }]"},
		{"bullmq", `url = "redis://h"` + "\nqueues = [\"q\"]"},
		{"celery", `url = "redis://h"` + "\nqueues = [\"q\"]"},
		{"rq", `url = "redis://h"` + "\nqueues = [\"q\"]"},
		{"sidekiq", `url = "redis://h"` + "\nqueues = [\"q\"]"},
		{"flexiq-redis", `url = "redis://h"` + "\nqueues = [\"q\"]"},
		{"flexiq-postgres", `url = "postgres://h/db"`},
		{"postgres-query", `url = "postgres://h/db"` + "\nquery = \"SELECT @a AS pending, 0 AS running\"\nparams = { a = 1 }"},
		{"river", `url = "postgres://h/db"`},
		{"pg-boss", `url = "postgres://h/db"`},
		{"graphile-worker", `url = "postgres://h/db"`},
		{"oban", `url = "postgres://h/db"`},
		{"good_job", `url = "postgres://h/db"`},
		{"solid-queue", `url = "postgres://h/db"`},
	}
	for name := range sourceTypes {
		if len(sourceTypes[name].Keys) == 0 {
			continue // no settings to change (none, a service pool's)
		}
		if !slices.ContainsFunc(types, func(t struct{ name, table string }) bool { return t.name == name }) {
			t.Errorf("source type %s: no table to test its settings' diff with", name)
		}
	}
	for _, typ := range types {
		c, err := parse("/etc/x.toml", []byte("[pools.p]\napp = \"a:q\"\n[pools.p.source]\ntype = \""+typ.name+"\"\n"+typ.table))
		if err != nil {
			t.Fatalf("%s: %v", typ.name, err)
		}
		base := c.Pools["p"]
		v := reflect.ValueOf(base.Source.Settings)
		for i := range v.NumField() {
			c := reflect.New(v.Type()).Elem()
			c.Set(v)
			name := v.Type().Field(i).Name
			fv := c.Field(i)
			if fv.Kind() == reflect.String && fv.String() != "" {
				fv.SetString(fv.String() + "x")
			} else {
				setNonZero(t, fv, "Source.Settings."+name)
			}
			changed := *base
			changed.Source.Settings = c.Interface()
			got := Diff(base, &changed)
			if len(got) != 1 || !strings.HasPrefix(got[0], "source.") || !typeTakes(typ.name, strings.TrimPrefix(got[0], "source.")) {
				t.Errorf("%s: changing %s: Diff = %q, want one key of the type", typ.name, name, got)
			}
		}
	}
}

// fieldPaths lists the dotted paths of t's leaf fields, descending into
// the struct fields of t's package and of the types in also.
func fieldPaths(t reflect.Type, also ...reflect.Type) []string {
	var paths []string
	var walk func(t reflect.Type, path string)
	walk = func(st reflect.Type, path string) {
		for i := range st.NumField() {
			f := st.Field(i)
			if f.Type.Kind() == reflect.Struct && (f.Type.PkgPath() == t.PkgPath() || slices.Contains(also, f.Type)) {
				walk(f.Type, path+f.Name+".")
				continue
			}
			paths = append(paths, path+f.Name)
		}
	}
	walk(t, "")
	return paths
}

func fieldIndex(t reflect.Type, dotted string) []int {
	var idx []int
	for _, part := range strings.Split(dotted, ".") {
		f, _ := t.FieldByName(part)
		idx = append(idx, f.Index...)
		t = f.Type
	}
	return idx
}

func setNonZero(t *testing.T, v reflect.Value, name string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(3)
	case reflect.Uint64, reflect.Uint:
		v.SetUint(3)
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.Zero(v.Type().Key()), reflect.Zero(v.Type().Elem()))
		v.Set(m)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Struct:
		setNonZero(t, v.Field(0), name) // a struct of another package: one key
	default:
		t.Fatalf("Pool.%s: no test value for kind %s; teach setNonZero", name, v.Kind())
	}
}

func TestDiffDaemon(t *testing.T) {
	a, b := &Daemon{PollInterval: time.Second}, &Daemon{PollInterval: time.Second}
	if got := DiffDaemon(a, b); got != nil {
		t.Errorf("DiffDaemon of equal = %q", got)
	}
	b.PollInterval = 2 * time.Second
	if got := DiffDaemon(a, b); !reflect.DeepEqual(got, []string{"daemon.poll_interval_sec"}) {
		t.Errorf("DiffDaemon = %q", got)
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"WorkingDirectory":          "working_directory",
		"EnvironmentFile":           "environment_file",
		"CPUQuota":                  "cpu_quota",
		"TargetCPUUtilisation":      "target_cpu_utilisation",
		"TargetQueueDepthPerWorker": "target_queue_depth_per_worker",
		"User":                      "user",
		"TasksMax":                  "tasks_max",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}
