package main

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

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// FuzzCheckConfig runs the check-config command on arbitrary files: it never
// panics, exits 0 or 1, prints every problem as one "FILE: ..." line, and
// prints an effective config that loads again when it accepts the file.
// Seeds: the shipped example and the configs of this package's tests.
func FuzzCheckConfig(f *testing.F) {
	if data, err := os.ReadFile("../../systemd/config.example.toml"); err == nil {
		f.Add(data)
		f.Add([]byte(strings.ReplaceAll(string(data), "\n# ", "\n")))
	}
	fset := token.NewFileSet()
	tree, err := parser.ParseFile(fset, "main_test.go", nil, 0)
	if err != nil {
		f.Fatal(err)
	}
	ast.Inspect(tree, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil && strings.Contains(s, "[pools.") {
				f.Add([]byte(s))
			}
		}
		return true
	})
	// One file per fuzzing process, rewritten for each input: 0600 and
	// root's when run as root, so that the file-safety check passes.
	path := filepath.Join(f.TempDir(), "config.toml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"check-config", path}, &stdout, &stderr)
		switch code {
		case exitOK:
			if _, err := config.Load(writeBack(t, stdout.Bytes())); err != nil {
				t.Fatalf("the effective config of an accepted file is refused: %v\n%s", err, stdout.String())
			}
		case exitFail:
			if stdout.Len() != 0 {
				t.Errorf("a refused file printed an effective config:\n%s", stdout.String())
			}
		default:
			t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
		}
		for _, line := range strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n") {
			if line == "" && stderr.Len() == 0 {
				continue
			}
			line = strings.TrimPrefix(line, "warning: ")
			if !strings.HasPrefix(line, path+": ") || strings.IndexFunc(line, unicode.IsControl) >= 0 || !utf8.ValidString(line) {
				t.Errorf("stderr line %q is not one printable \"FILE: ...\" line", line)
			}
		}
	})
}

// writeBack writes an effective config next to the fuzzed file.
func writeBack(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "effective.toml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
