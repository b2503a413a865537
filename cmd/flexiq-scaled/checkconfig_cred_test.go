package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check-config judges the credential files a configuration names, as the
// daemon does at load and at reload: it used to exit 0 for a 0644
// password_file and for a missing one, which then held the pool at zero
// workers from its first connect.
func TestCheckConfigCredentialFiles(t *testing.T) {
	dir := t.TempDir()
	pw := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("hunter2\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, passwordFile string
		code               int
		want               string // in stderr
	}{
		{"good", pw("good", 0o600), 0, ""},
		{"world-readable", pw("open", 0o644), 1, "pools.q.source.password_file: credential file " + filepath.Join(dir, "open") + " gives group or others access (mode 0644)"},
		{"missing", filepath.Join(dir, "missing"), 1, "pools.q.source.password_file: credential file " + filepath.Join(dir, "missing") + " does not exist: deploy the file before the configuration that names it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "config.toml", `
[pools.q]
exec = ["/bin/true"]
user = "root"
[pools.q.source]
type = "river"
url = "postgres://app@127.0.0.1:5432/q"
password_file = "`+tc.passwordFile+`"
`)
			r := invoke(t, "check-config", path)
			want := tc.want
			if want != "" {
				want = "\n" + path + ": " + want // the problem names the config file and key first
			}
			if r.code != tc.code || !strings.Contains(r.stderr, want) {
				t.Fatalf("want exit %d and %q; got %v", tc.code, want, r)
			}
		})
	}
}

// A weaker TLS mode to a remote server is allowed, and warned about.
func TestCheckConfigWeakTLSWarning(t *testing.T) {
	path := writeFile(t, "config.toml", `
[pools.q]
exec = ["/bin/true"]
user = "root"
[pools.q.source]
type = "river"
url = "postgres://app@db.example:5432/q?sslmode=prefer"
`)
	r := invoke(t, "check-config", path)
	want := "warning: " + path + `: pools.q.source.url: sslmode "prefer" to a remote server`
	if r.code != 0 || !strings.Contains(r.stderr, want) {
		t.Fatalf("want exit 0 and %q; got %v", want, r)
	}
}
