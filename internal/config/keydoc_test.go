package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The reference (internal/refdoc) is generated from the KeyDocs; these tests
// hold the KeyDocs to what the loader does, so that the generated docs say
// what the code checks.

// documented gathers the keys of Reference() by table.
func documented(t *testing.T) map[string][]string {
	t.Helper()
	byTable := map[string][]string{}
	for _, table := range Reference() {
		for _, k := range table.Keys {
			// The parts of [pools.NAME.behavior] are tables of their own.
			if slices.Contains(byTable[table.Name], k.Name) && !strings.HasPrefix(table.Name, "pools.NAME.behavior") {
				t.Errorf("[%s] %s is documented twice", table.Name, k.Name)
			}
			byTable[table.Name] = append(byTable[table.Name], k.Name)
		}
	}
	return byTable
}

// rawKeys lists the TOML names of the value fields of a raw struct, as the
// decoder takes them: embedded structs included, sub-tables (struct fields
// of their own, as [pools.NAME.source]) not.
func rawKeys(raw any) []string {
	var keys []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			switch {
			case f.Anonymous && f.Type.Kind() == reflect.Struct:
				walk(f.Type)
			case f.Type == reflect.TypeFor[value]():
				name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
				keys = append(keys, name)
			}
		}
	}
	walk(reflect.TypeOf(raw).Elem())
	return keys
}

// (a) The keys documented for a table are the keys its raw struct accepts.
// The rule and behavior tables need no such test: rules.go checks them
// against their TableDocs' Names, so that a key is taken only if documented.
func TestKeyDocsCoverRawKeys(t *testing.T) {
	docs := documented(t)
	for table, raw := range map[string]any{
		"daemon":            &rawDaemon{},
		"capacity":          &rawCapacity{},
		"host_guard":        &rawHostGuard{},
		"pools.NAME":        &rawPool{},
		"pools.NAME.limits": &rawLimits{},
	} {
		want, got := rawKeys(raw), docs[table]
		// [pools.NAME.wake] is taken only to be refused, with where it
		// belongs ([pools.NAME.service.wake]).
		want = slices.DeleteFunc(want, func(k string) bool { return table == "pools.NAME" && k == "wake" })
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("[%s]: documented %v, the loader takes %v", table, got, want)
		}
	}
	// Every table of the file is documented.
	for _, name := range []string{"daemon", "capacity", "host_guard", "prometheus", "fleet", "pools"} {
		if !slices.ContainsFunc(Reference(), func(t TableDoc) bool { return strings.HasPrefix(t.Name, name) }) {
			t.Errorf("[%s] is not in Reference()", name)
		}
	}
	// The source types' keys are bound where each type decodes them
	// (SourceTypeDocs).
}

// keyFile writes a configuration that sets key = val in table, with what the
// key needs beside it (context), so that the file is valid but for the value.
func keyFile(t TableDoc, key, val string) (text, fullKey string) {
	table := t.Name
	switch t.Title {
	case behaviorDirectionKeys.Title:
		table = "pools.NAME.behavior.scale_up"
	case behaviorPolicyKeys.Title:
		table = "pools.NAME.behavior.scale_up.policies"
	}
	set := ""
	if key != "" {
		set = key + " = " + val + "\n"
	}
	set += keyContext[key]
	switch table {
	case "daemon", "capacity":
		return "[" + table + "]\n" + set + pool(""), table + "." + key
	case "host_guard":
		// A [host_guard] with no key is no guard at all: an anchor, at
		// its default, keeps the table there when key is left out.
		anchor := "alpha_down = 0.1\n"
		if key == "alpha_down" {
			anchor = "alpha_up = 0.5\n"
		}
		return "[host_guard]\n" + anchor + set + pool(""), table + "." + key
	case "prometheus":
		// Exactly one of the URL keys: url anchors the table unless the
		// key is one of them.
		anchor := "url = \"http://127.0.0.1:9090\"\n"
		if strings.HasPrefix(key, "url") {
			anchor = ""
		}
		return "[prometheus]\n" + anchor + set + pool(""), table + "." + key
	case "fleet":
		// A pool joins, so that the table is read whole; url anchors
		// it unless the key is one of the URL keys.
		anchor := "url = \"redis://127.0.0.1:6379/0\"\n"
		if strings.HasPrefix(key, "url") {
			anchor = ""
		}
		if key != "host_id" {
			anchor += "host_id = \"h1\"\n"
		}
		return "[fleet]\n" + anchor + set + pool("") + "[pools.email.fleet]\n", table + "." + key
	case "pools.NAME.fleet":
		anchor := "url = \"redis://127.0.0.1:6379/0\"\n"
		if strings.HasPrefix(key, "url") {
			anchor = ""
		}
		return "[fleet]\nhost_id = \"h1\"\n" + pool("") + "[pools.email.fleet]\n" + anchor + set, "pools.email.fleet." + key
	case "pools.NAME":
		return pool(set), "pools.email." + key
	case "pools.NAME.limits":
		return pool("") + "[pools.email.limits]\n" + set, "pools.email.limits." + key
	case "pools.NAME.scale_up":
		return pool("policy = \"rules\"\n[[pools.email.scale_up]]\nwhen = \"pending > 0\"\n" + set), "pools.email.scale_up[0]." + key
	case "pools.NAME.behavior":
		return pool("[pools.email.behavior]\n" + set), "pools.email.behavior." + key
	case "pools.NAME.behavior.scale_up":
		return pool("[pools.email.behavior.scale_up]\npolicies = [{ type = \"workers\", value = 4, period_sec = 15 }]\n" + set),
			"pools.email.behavior.scale_up." + key
	case "pools.NAME.service":
		return pool("") + "[pools.email.service]\n" + set, "pools.email.service." + key
	case "pools.NAME.service.ports.NAME":
		anchor := "port = \"auto\"\n"
		if key == "port" {
			anchor = ""
		}
		return pool("") + "[pools.email.service.ports.http]\n" + anchor + set, "pools.email.service.ports.http." + key
	case "pools.NAME.service.readiness":
		base := "[pools.email.service.ports]\nhttp = \"auto\"\n[pools.email.service.readiness]\n"
		if t.Title == probeTimingKeys.Title {
			// A probe to time; its timeout below the lowest period.
			base += "type = \"tcp\"\nport = \"http\"\n"
			if key != "timeout_sec" {
				base += "timeout_sec = 0.5\n"
			}
		}
		return pool("") + base + set, "pools.email.service.readiness." + key
	case "pools.NAME.service.template":
		src, err := filepath.Abs("testdata/service/plain.tmpl")
		if err != nil {
			panic(err)
		}
		return pool("") + "[[pools.email.service.template]]\nsource = " + strconv.Quote(src) +
			"\ndestination = \"/etc/flexiq-test/plain.conf\"\n" + set, "pools.email.service.template[0]." + key
	case "pools.NAME.service.wake":
		listen := "listen = \"127.0.0.1:18080\"\n"
		if key == "listen" {
			listen = ""
		}
		return pool("") + "[pools.email.service.ports]\nhttp = \"auto\"\n[pools.email.service.wake]\n" + listen + set, "pools.email.service.wake." + key
	case "pools.NAME.behavior.scale_up.policies":
		entry := map[string]string{"type": `"workers"`, "value": "4", "period_sec": "15"}
		if key != "" {
			entry[key] = val
		}
		return pool(fmt.Sprintf("[pools.email.behavior.scale_up]\npolicies = [{ type = %s, value = %s, period_sec = %s }]\n",
			entry["type"], entry["value"], entry["period_sec"])), "pools.email.behavior.scale_up.policies[0]." + key
	}
	panic("keyFile: no template for table " + table)
}

// keyContext is what a key needs beside it to be valid at all.
var keyContext = map[string]string{
	"threads_per_worker_fallback": "threads_per_worker = \"auto\"\n",
	"demand_window_sec":           "demand = \"littles-law\"\n",
	"onset_min_jobs":              "demand = \"littles-law\"\n",
	"quiet_period_sec":            "quiet_signal = \"TSTP\"\n",
	"quiet_signal":                "quiet_period_sec = 20\n",
	// The two thresholds must stay ordered while each moves to its bounds.
	"host_cpu_scale_up_max": "host_cpu_emergency = 1\n",
	"host_cpu_emergency":    "host_cpu_scale_up_max = 0.001\n",
	// Service pools: what each key applies to.
	"cpuset_split":             "group_size = 2\n",
	"path":                     "type = \"http\"\nport = \"http\"\n",
	"port":                     "type = \"tcp\"\n",
	"command":                  "type = \"command\"\n",
	"timeout_sec":              "period_sec = 10\n",
	"after_change_timeout_sec": "after_change = [\"/usr/bin/true\"]\n",
	// A fleet's lease outlives two heartbeats.
	"ttl_sec": "heartbeat_sec = 0.0001\n",
}

// loadAt loads text from path, so that two loads differ only by the text.
func loadAt(t *testing.T, path, text string) (*Config, error) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(path)
}

// (b) Writing a key's documented default gives the same configuration as
// leaving it out. A Default in words ("unset: no cap", "`[daemon]
// poll_interval_sec`") names no value to write, and is skipped.
func TestKeyDocDefaultsAreTheDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	checked := 0
	for _, table := range Reference() {
		for _, k := range table.Keys {
			if k.Default == "" || !IsLiteral(k.Default) {
				continue
			}
			name := table.Name + "." + k.Name
			without, _ := keyFile(table, "", "")
			if ctx := keyContext[k.Name]; ctx != "" {
				// The context alone, as the key's default needs it.
				without, _ = keyFile(table, k.Name, k.Default)
				without = strings.Replace(without, k.Name+" = "+k.Default+"\n", "", 1)
			}
			with, _ := keyFile(table, k.Name, k.Default)
			a, err := loadAt(t, path, without)
			if err != nil {
				t.Errorf("%s: the file without it does not load: %v", name, err)
				continue
			}
			b, err := loadAt(t, path, with)
			if err != nil {
				t.Errorf("%s = %s, its documented default, is refused: %v", name, k.Default, err)
				continue
			}
			if k.Name == "user" {
				// Written, the user is marked as chosen (only a chosen
				// user may be root); the rest must be the same.
				b.Pools["email"].UserExplicit = false
			}
			checked++
			if !sameConfig(a, b) {
				t.Errorf("%s = %s, its documented default, gives another configuration than leaving it out", name, k.Default)
			}
		}
	}
	// A guard against a test that checks nothing: 35 defaults are values today.
	if checked < 30 {
		t.Errorf("only %d documented defaults were loaded", checked)
	}
}

// A range the Limits state: ">= 1", "> 0", "in (0, 1]", "in [0, 1)".
var (
	reAtLeast  = regexp.MustCompile("^`(>=|>) (-?[0-9.]+)`")
	reInterval = regexp.MustCompile("^in `([\\[(])(-?[0-9.]+), (-?[0-9.]+)([\\])])`")
	reOrMore   = regexp.MustCompile("^`0` \\(off\\), or `>= ([0-9]+)`")
)

// bound is one end of a key's range: a value on the edge, and whether the
// edge itself is inside.
type bound struct {
	edge      float64
	inclusive bool
	upper     bool
}

func bounds(limits string) []bound {
	if m := reAtLeast.FindStringSubmatch(limits); m != nil {
		v, _ := strconv.ParseFloat(m[2], 64)
		return []bound{{v, m[1] == ">=", false}}
	}
	if m := reInterval.FindStringSubmatch(limits); m != nil {
		lo, _ := strconv.ParseFloat(m[2], 64)
		hi, _ := strconv.ParseFloat(m[3], 64)
		return []bound{{lo, m[1] == "[", false}, {hi, m[4] == "]", true}}
	}
	if m := reOrMore.FindStringSubmatch(limits); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		return []bound{{v, true, false}}
	}
	return nil
}

func formatNum(v float64, integer bool) string {
	if integer {
		return strconv.Itoa(int(v))
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// (c) A numeric key's documented range is the loader's: the edges inside it
// are accepted, and a value just outside is refused with a problem naming
// the key. Limits that are not a plain range (0..max_workers, "a percentage
// above 0", byte counts) are not parsed, and say which keys in rangeless.
func TestKeyDocLimitsAreTheLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	checked := 0
	for _, table := range Reference() {
		for _, k := range table.Keys {
			if k.Type != "integer" && k.Type != "number" && k.Type != "seconds" {
				continue
			}
			bs := bounds(k.Limits)
			if bs == nil {
				if _, ok := rangeless[k.Name]; !ok {
					t.Errorf("%s.%s: limits %q are not a range this test reads; add it to rangeless with why", table.Name, k.Name, k.Limits)
				}
				continue
			}
			integer := k.Type == "integer"
			step := 0.001
			if integer {
				step = 1
			}
			checked++
			for _, b := range bs {
				in, out := b.edge, b.edge-step
				if b.upper {
					out = b.edge + step
				}
				if !b.inclusive {
					in, out = b.edge+step, b.edge
					if b.upper {
						in = b.edge - step
					}
				}
				text, full := keyFile(table, k.Name, formatNum(in, integer))
				if _, err := loadAt(t, path, text); err != nil {
					t.Errorf("%s = %s is inside %q, and refused: %v", full, formatNum(in, integer), k.Limits, err)
				}
				text, full = keyFile(table, k.Name, formatNum(out, integer))
				_, err := loadAt(t, path, text)
				if err == nil || !strings.Contains(err.Error(), ": "+full+": ") {
					t.Errorf("%s = %s is outside %q: want a problem naming the key, got %v", full, formatNum(out, integer), k.Limits, err)
				}
			}
		}
	}
	if checked < 35 {
		t.Errorf("only %d documented ranges were checked", checked)
	}
}

// rangeless are the numeric keys whose Limits are not one range, and why.
var rangeless = map[string]string{
	"priority":          "any integer: an order, with no bounds",
	"keep_warm_workers": "0 to max_workers: its upper end is another key's value",
}
