package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The daemon's load, at start and at every reload, judges a template file
// as it judges config.toml (issue 27, item 6): a template anyone but root
// may write is refused, naming the file, the key and what is wrong, so a
// reload keeps the running configuration.
func TestLoadConfigTemplateFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("ownership is only judged when the daemon runs as root")
	}
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "upstream.tmpl")
	if err := os.WriteFile(tmpl, []byte("{{range .Replicas}}{{.Address}}\n{{end}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(`
[pools.web]
exec = ["/bin/true"]
user = "root"
[pools.web.source]
path = "/nonexistent/flexiq.db"
[[pools.web.service.template]]
source = "`+tmpl+`"
destination = "/etc/nginx/conf.d/web-upstream.conf"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadConfig(Options{ConfigPath: cfgPath}); err != nil {
		t.Fatalf("a root-owned 0644 template: %v", err)
	}
	if err := os.Chmod(tmpl, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmpl, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, _, err := loadConfig(Options{ConfigPath: cfgPath})
	want := cfgPath + ": pools.web.service.template[0].source: refusing template " + tmpl + ": it is writable by group or others (mode 0666) and is owned by uid 65534, not root"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
}
