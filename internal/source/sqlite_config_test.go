package source

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func loadConfig(t *testing.T, body string) (*config.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load(path)
}

// The keys a SQLite type does not take are refused when the file is
// loaded, so that its settings cannot hold them (the opener used to check).
func TestSQLiteKeysOfTheOtherType(t *testing.T) {
	pool := "[pools.p]\napp = \"a:q\"\n[pools.p.source]\n"
	for _, tt := range []struct{ name, table, want string }{
		{"query on flexiq-sqlite", "path = \"/var/lib/q.db\"\nquery = \"SELECT 1, 1\"\n",
			"pools.p.source.query: only for postgres-query, sqlite-query sources, not flexiq-sqlite"},
		{"queues on sqlite-query", "type = \"sqlite-query\"\npath = \"/var/lib/q.db\"\nquery = \"SELECT 1, 1\"\nqueues = [\"a\"]\n",
			"pools.p.source.queues: only for"},
		{"namespace on sqlite-query", "type = \"sqlite-query\"\npath = \"/var/lib/q.db\"\nquery = \"SELECT 1, 1\"\nnamespace = \"n\"\n",
			"pools.p.source.namespace: only for"},
	} {
		_, err := loadConfig(t, pool+tt.table)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// A loaded table opens as the source its settings say.
func TestSQLiteSettingsFromConfig(t *testing.T) {
	c, err := loadConfig(t, `
[pools.a]
app = "a:q"
[pools.a.source]
path = "/var/lib/q.db"
queues = ["x", "y"]
namespace = "n"
[pools.b]
app = "a:q"
[pools.b.source]
type = "sqlite-query"
path = "/var/lib/q.db"
query = "SELECT 1, 2"
`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a": FlexiqSQLiteSettings{Path: "/var/lib/q.db", Queues: []string{"x", "y"}, Namespace: "n"},
		"b": SQLiteQuerySettings{Path: "/var/lib/q.db", Query: "SELECT 1, 2"},
	}
	for name, w := range want {
		if got := c.Pools[name].Source.Settings; !reflect.DeepEqual(got, w) {
			t.Errorf("%s: settings %#v, want %#v", name, got, w)
		}
		s, err := New(c.Pools[name].Source)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s.Close()
	}
}
