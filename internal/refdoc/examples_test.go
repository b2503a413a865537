package refdoc

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// TestServicesExamplesLoad: every TOML example of docs/services.md is a
// configuration the daemon takes, with the page's own template, so that
// the worked example cannot rot as the keys change. Only the file is
// judged: the users and programs it names need not exist here.
func TestServicesExamplesLoad(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "services.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tmpl := regexp.MustCompile("(?s)```\n(upstream .*?)```").FindSubmatch(page)
	if tmpl == nil {
		t.Fatal("docs/services.md has no upstream template")
	}
	tmplPath := filepath.Join(dir, "web-upstream.tmpl")
	if err := os.WriteFile(tmplPath, tmpl[1], 0o644); err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```toml\n(.*?)```").FindAllSubmatch(page, -1)
	if len(blocks) < 2 {
		t.Fatalf("docs/services.md has %d TOML examples, want the worked one and the platform's", len(blocks))
	}
	for i, b := range blocks {
		text := strings.ReplaceAll(string(b[1]), "/etc/flexiq-scaled/web-upstream.tmpl", tmplPath)
		c := loadExample(t, dir, i, text)
		if c == nil {
			continue
		}
		for name, p := range c.Pools {
			if !p.IsService() {
				t.Errorf("example %d: pool %s is not a service pool", i, name)
			}
		}
	}
}

// TestFleetExamplesLoad: the configuration examples of docs/fleet.md load,
// and every pool of them joins a fleet with a store.
func TestFleetExamplesLoad(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "fleet.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```toml\n(.*?)```").FindAllSubmatch(page, -1)
	if len(blocks) < 2 {
		t.Fatalf("docs/fleet.md has %d TOML examples, want Redis's and PostgreSQL's", len(blocks))
	}
	stores := map[string]bool{}
	for i, b := range blocks {
		text := string(b[1])
		// host_id defaults to this machine's id, which a test host
		// need not have.
		if !strings.Contains(text, "\nhost_id =") {
			text = strings.Replace(text, "[fleet]\n", "[fleet]\nhost_id = \"docs\"\n", 1)
		}
		c := loadExample(t, t.TempDir(), i, text)
		if c == nil {
			continue
		}
		for name, p := range c.Pools {
			if !p.Joins() || p.Fleet.Store == "" {
				t.Errorf("example %d: pool %s joins no fleet with a store: %+v", i, name, p.Fleet)
				continue
			}
			stores[p.Fleet.Store] = true
		}
	}
	if !stores[config.FleetStoreRedis] || !stores[config.FleetStorePostgres] {
		t.Errorf("stores of the examples %v, want both", stores)
	}
}

// loadExample loads example i of a page from dir/config.toml; nil, with
// the error reported, when it does not load.
func loadExample(t *testing.T, dir string, i int, text string) *config.Config {
	t.Helper()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Errorf("example %d does not load: %v\n%s", i, err, text)
	}
	return c
}
