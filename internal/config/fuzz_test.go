package config

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// seedConfigs are the configuration files the repository already has: the
// shipped example, and every string literal in this package's tests that
// looks like a config (whole files and fragments alike), so that the fuzzer
// starts from inputs that reach deep into the loader.
func seedConfigs(tb testing.TB) [][]byte {
	tb.Helper()
	var seeds [][]byte
	if data, err := os.ReadFile("../../systemd/config.example.toml"); err == nil {
		seeds = append(seeds, data)
		// The example's active part starts no workers; its commented
		// pools are the interesting part.
		uncommented := strings.ReplaceAll(string(data), "\n# ", "\n")
		seeds = append(seeds, []byte(uncommented))
	}
	fset := token.NewFileSet()
	for _, name := range []string{"config_test.go", "machine_test.go", "service_test.go", "fleet_test.go"} {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			tb.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || !strings.ContainsAny(s, "=[") {
				return true
			}
			seeds = append(seeds, []byte(s))
			if !strings.Contains(s, "[pools.") {
				// A fragment of a pool table, as the tests pass to pool().
				seeds = append(seeds, []byte(pool(s)))
			}
			return true
		})
	}
	return seeds
}

// FuzzParse: whatever the file, the loader never panics, and a file it
// accepts survives a round trip through the effective configuration
// (internal/hostcheck's FuzzChecks runs the machine checks on such files).
func FuzzParse(f *testing.F) {
	for _, s := range seedConfigs(f) {
		f.Add(s)
	}
	// Service pools that load, their template path made absolute.
	dir, err := filepath.Abs("testdata/service")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(strings.ReplaceAll(servicePool, "TESTDATA", dir)))
	f.Add([]byte(pool("") + "[pools.email.service]\ngroup_size = 3\ncpuset_split = true\n" +
		"[pools.email.service.readiness]\ntype = \"command\"\ncommand = [\"/usr/bin/check\"]\nperiod_sec = 1.5\ntimeout_sec = 0.25\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parse("fuzz.toml", data)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("parse error of type %T, not *Error: %v", err, err)
			}
			for _, p := range err.(*Error).Problems {
				// One printable line each: a problem must not
				// forge another, or cut the journal's message.
				if s := p.String(); p.File != "fuzz.toml" || !strings.HasPrefix(s, "fuzz.toml: ") ||
					strings.IndexFunc(s, unicode.IsControl) >= 0 || !utf8.ValidString(s) {
					t.Errorf("malformed problem %q", s)
				}
			}
			return
		}
		for name, p := range c.Pools {
			if !poolNameRE.MatchString(name) || p.Name != name {
				t.Fatalf("accepted pool name %q (%q)", name, p.Name)
			}
			if len(p.Exec) == 0 || p.Exec[0] == "" {
				t.Fatalf("pool %s accepted with exec %q", name, p.Exec)
			}
			if _, path, ok := localFile(p.Source); ok {
				if _, hidden := hiddenBy(filepath.Clean(path)); hidden {
					t.Fatalf("pool %s accepted with a hidden source %q", name, path)
				}
			}
		}
		var buf bytes.Buffer
		if err := WriteEffective(&buf, c); err != nil {
			t.Fatalf("WriteEffective: %v", err)
		}
		again, err := parse("fuzz.toml", buf.Bytes())
		if err != nil {
			t.Fatalf("the effective config of an accepted file is refused:\n%s\n%v\ninput:\n%q", buf.String(), err, data)
		}
		// And it is the same configuration: the pools' effective
		// values (Diff) are unchanged, but that user is now written.
		for name, p := range c.Pools {
			p.UserExplicit = true
			if d := Diff(p, again.Pools[name]); d != nil {
				t.Fatalf("the effective config of an accepted file differs in %q:\n%s\ninput:\n%q", d, buf.String(), data)
			}
		}
	})
}
