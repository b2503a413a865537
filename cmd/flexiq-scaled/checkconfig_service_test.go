package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A service pool (issue 19) as check-config sees it: a good one prints its
// effective [service] table; each kind of bad input is one line naming the
// file and the key.
func TestCheckConfigService(t *testing.T) {
	userName, groupName := identity(t)
	tmplDir, err := filepath.Abs("../../internal/config/testdata/service")
	if err != nil {
		t.Fatal(err)
	}
	web := func(service string) string {
		return strings.ReplaceAll(`
[pools.web]
exec = ["/bin/sh", "-c", "exec sleep infinity"]
user = "`+userName+`"
group = "`+groupName+`"
max_workers = 4
[pools.web.source]
path = "/nonexistent/flexiq.db"
[pools.web.service]
metrics_port = "metrics"
[pools.web.service.ports]
http = 8001
metrics = "auto"
`+service, "TESTDATA", tmplDir)
	}
	good := web(`[pools.web.service.readiness]
type = "http"
path = "/health"
port = "http"
[[pools.web.service.template]]
source = "TESTDATA/upstream.tmpl"
destination = "/etc/nginx/conf.d/web-upstream.conf"
after_change = ["/usr/bin/systemctl", "reload", "nginx"]
`)
	r := invoke(t, "check-config", writeFile(t, "config.toml", good))
	if r.code != 0 {
		t.Fatalf("check-config of a good service pool: %v", r)
	}
	for _, want := range []string{"[pools.web.service]", "[pools.web.service.ports]", "http = 8001", `metrics = "auto"`,
		"[pools.web.service.readiness]", `type = "http"`, "[[pools.web.service.template]]", `mode = "0644"`,
		`after_change = ["/usr/bin/systemctl", "reload", "nginx"]`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("effective config lacks %q:\n%s", want, r.stdout)
		}
	}

	for _, tc := range []struct{ name, text, line string }{
		{"template does not parse", web("[[pools.web.service.template]]\nsource = \"TESTDATA/bad_parse.tmpl\"\ndestination = \"/etc/up.conf\"\n"),
			"pools.web.service.template[0].source: template does not parse: " + tmplDir + "/bad_parse.tmpl:3: "},
		{"after_change not absolute", web("[[pools.web.service.template]]\nsource = \"TESTDATA/upstream.tmpl\"\ndestination = \"/etc/up.conf\"\nafter_change = [\"systemctl\", \"reload\", \"nginx\"]\n"),
			`pools.web.service.template[0].after_change: "systemctl" is not an absolute path`},
		{"fixed ranges overlap", web("") + "[pools.api]\nexec = [\"/bin/true\"]\nuser = \"" + userName + "\"\n[pools.api.source]\npath = \"/nonexistent/a.db\"\n[pools.api.service.ports]\napi = 8000\n",
			"pools.web.service.ports.http: the fixed range 8001-8004 overlaps pools.api.service.ports.api's 8000-8009"},
		{"probe port not declared", web("[pools.web.service.readiness]\ntype = \"tcp\"\nport = \"grpc\"\n"),
			`pools.web.service.readiness.port: "grpc": not declared`},
		{"group_size above max_total_workers", "[capacity]\nmax_total_workers = 2\n" + strings.Replace(web(""), "metrics_port", "group_size = 3\nmetrics_port", 1),
			"pools.web.service.group_size: a group of 3 ranks is 3 workers, and [capacity] max_total_workers = 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "config.toml", tc.text)
			r := invoke(t, "check-config", path)
			if r.code != 1 || r.stdout != "" {
				t.Fatalf("want exit 1 and no effective config, got %v", r)
			}
			if !strings.Contains(r.stderr, path+": "+tc.line) {
				t.Errorf("stderr lacks %q:\n%s", path+": "+tc.line, r.stderr)
			}
		})
	}
}
