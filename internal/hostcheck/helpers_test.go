package hostcheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// The checks judge configurations that config.Load accepted; these build
// them as config's own tests do.

// writeConfig writes text to a config file in a fresh temp dir.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func load(t *testing.T, text string) (*config.Config, error) {
	t.Helper()
	return config.Load(writeConfig(t, text))
}

// pool is a valid one-pool config with extra lines in [pools.email].
func pool(extra string) string {
	return `[pools.email]
app = "myapp.tasks:queue"
` + extra + `
[pools.email.source]
path = "/var/lib/flexiq/flexiq.db"
`
}

// withPath returns s, a flexiq-sqlite source, reading path: Load refuses a
// database under /tmp (t.TempDir), which the daemon cannot see.
func withPath(t *testing.T, s config.Source, path string) config.Source {
	t.Helper()
	set, ok := s.Settings.(source.FlexiqSQLiteSettings)
	if !ok {
		t.Fatalf("source settings %T, want source.FlexiqSQLiteSettings", s.Settings)
	}
	set.Path = path
	s.Settings = set
	return s
}

func keys(ps []config.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Key)
	}
	return out
}

// commandProbe is pool(extra) with a command readiness probe, probe its
// further lines.
func commandProbe(extra, probe string) string {
	return pool(extra) + "[pools.email.service.readiness]\ntype = \"command\"\ncommand = [\"/usr/bin/check\"]\n" + probe
}

// svc is a valid one-pool config with body after [pools.email].
func svc(body string) string { return pool("") + body }

// withSource is a valid one-pool config with the given [pools.email.source]
// body.
func withSource(body string) string {
	return `[pools.email]
app = "myapp.tasks:queue"
[pools.email.source]
` + body + "\n"
}
