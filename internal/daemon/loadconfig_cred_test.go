package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The daemon's load, at start and at every reload, refuses a configuration
// whose credential file is missing or open to others, naming the file and
// the key, so that a reload keeps the running configuration rather than
// taking one whose pool would sit at zero workers from its first connect.
func TestLoadConfigCredentialFile(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "db.password")
	if err := os.WriteFile(pw, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(`
[pools.q]
exec = ["/bin/true"]
user = "root"
[pools.q.source]
type = "river"
url = "postgres://app@127.0.0.1:5432/q"
password_file = "`+pw+`"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadConfig(Options{ConfigPath: cfgPath}); err != nil {
		t.Fatalf("a 0600 password file: %v", err)
	}
	for _, tc := range []struct {
		name  string
		setup func()
		want  string
	}{
		{"world-readable", func() { os.Chmod(pw, 0o644) }, "gives group or others access (mode 0644)"},
		{"missing", func() { os.Remove(pw) }, "does not exist: deploy the file before the configuration that names it"},
	} {
		tc.setup()
		_, _, err := loadConfig(Options{ConfigPath: cfgPath})
		if want := cfgPath + ": pools.q.source.password_file: credential file " + pw; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q ... %q", tc.name, err, want, tc.want)
		}
	}
}
