package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/testfile"
)

// Issue 27, item 6, as check-config reports it: a template anyone but root
// may write, a template that renders past the cap, one that is a FIFO, and
// a template over another pool's discovery file are each one line naming
// the file, the key and what is wrong; none hangs the check.
func TestCheckConfigTemplateBounds(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("ownership is only judged when run as root")
	}
	userName, groupName := identity(t)
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode, uid int) string {
		return testfile.Owned(t, filepath.Join(dir, name), text, mode, uid)
	}
	fifo := filepath.Join(dir, "fifo.tmpl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	good := write("good.tmpl", "x\n", 0o644, 0)
	pool := func(name, src, dest string) string {
		return `
[pools.` + name + `]
exec = ["/bin/sh", "-c", "exec sleep infinity"]
user = "` + userName + `"
group = "` + groupName + `"
[pools.` + name + `.source]
path = "/nonexistent/flexiq.db"
[pools.` + name + `.service.ports]
http = "auto"
[[pools.` + name + `.service.template]]
source = "` + src + `"
destination = "` + dest + `"
`
	}
	for _, tc := range []struct{ name, text, line string }{
		{"owned by nobody, mode 0666", pool("web", write("nobody.tmpl", "x\n", 0o666, 65534), "/etc/up.conf"),
			"pools.web.service.template[0].source: refusing template " + dir + "/nobody.tmpl: it is writable by group or others (mode 0666) and is owned by uid 65534, not root"},
		{"range over a number", pool("web", write("range.tmpl", "{{range 30000000}}0123456789{{end}}", 0o644, 0), "/etc/up.conf"),
			"pools.web.service.template[0].source: template does not parse: " + dir + "/range.tmpl:1: range over the number 30000000"},
		{"renders over 4 MiB", pool("web", write("big.tmpl", "{{$n := 30000000}}{{range $n}}0123456789{{end}}", 0o644, 0), "/etc/up.conf"),
			"pools.web.service.template[0].source: template fails on a sample of this pool's replicas (ports: http): " + dir + "/big.tmpl: renders over 4 MiB"},
		{"FIFO", pool("web", fifo, "/etc/up.conf"),
			"pools.web.service.template[0].source: " + fifo + " is a named pipe (FIFO), not a regular file"},
		{"over another pool's discovery file", pool("email", good, "/run/flexiq-scaled/discovery/web.json") + pool("web", good, "/etc/up.conf"),
			"pools.email.service.template[0].destination: /run/flexiq-scaled/discovery/web.json is also written for pool web (its discovery file, pools.web.service.discovery_dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "config.toml", tc.text)
			done := make(chan result, 1)
			go func() { done <- invoke(t, "check-config", path) }()
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("check-config still running after 20s")
			}
			if r.code != 1 || r.stdout != "" {
				t.Fatalf("want exit 1 and no effective config, got %v", r)
			}
			if !strings.Contains(r.stderr, path+": "+tc.line) {
				t.Errorf("stderr lacks %q:\n%s", path+": "+tc.line, r.stderr)
			}
		})
	}
}
