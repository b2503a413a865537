package hostcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func TestWarnings(t *testing.T) {
	c, err := load(t, pool("drain_timeout_sec = 0\nuser = \"root\""))
	if err != nil {
		t.Fatal(err)
	}
	// Load refuses a database under /tmp, which the daemon cannot see;
	// Warnings only looks whether the file is there.
	db := filepath.Join(t.TempDir(), "flexiq.db")
	c.Pools["email"].Source = withPath(t, c.Pools["email"].Source, db)
	ws := strings.Join(Warnings(c), "\n")
	for _, want := range []string{db + " does not exist yet", "workers run as root", "no stop timeout"} {
		if !strings.Contains(ws, want) {
			t.Errorf("warnings %q lack %q", ws, want)
		}
	}
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if ws := strings.Join(Warnings(c), "\n"); strings.Contains(ws, "does not exist") {
		t.Errorf("warning for an existing database: %q", ws)
	}
}

// A world-readable drop-in with a secret in it is warned about under its
// own name.
func TestDropInSecretWarning(t *testing.T) {
	path := writeConfig(t, "")
	dir := config.DropInDir(path)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "web.toml")
	text := "[pools.web]\napp = \"web.tasks:queue\"\nenvironment = { DB_PASSWORD = \"x\" }\n[pools.web.source]\npath = \"/var/lib/flexiq/web.db\"\n"
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	w := SecretWarnings(c)
	if len(w) != 1 || w[0].File != f || w[0].Key != "pools.web.environment.DB_PASSWORD" {
		t.Errorf("warnings %v, want one for %s", w, f)
	}
}
