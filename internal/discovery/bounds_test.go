package discovery

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 27, item 6: a template is read, rendered and published within
// bounds, and from and to files that are what they claim to be.

// within runs f and fails the test if it has not returned after d: the
// proof that a FIFO or a spinning template does not hang the caller.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still blocked after %v", what, d)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A template source gets config.toml's checks: itself (no link), a regular
// file (a FIFO must not hang the load), and writable by root only.
func TestLoadTemplateRefusesUnsafeSource(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("ownership is only judged when the daemon runs as root")
	}
	dir := t.TempDir()
	good := writeTemplate(t, dir, "good.tmpl", envTemplate)
	if err := os.Chmod(good, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		make func(path string)
		want string
	}{
		{"owned by nobody, mode 0666", func(p string) {
			writeTemplate(t, dir, filepath.Base(p), envTemplate)
			os.Chmod(p, 0o666)
			os.Chown(p, 65534, 65534)
		}, "owned by uid 65534"},
		{"group-writable", func(p string) {
			writeTemplate(t, dir, filepath.Base(p), envTemplate)
			os.Chmod(p, 0o664)
		}, "writable by group or others (mode 0664)"},
		{"symbolic link", func(p string) { os.Symlink(good, p) }, "symbolic link"},
		{"FIFO", func(p string) { mkfifo(t, p) }, "named pipe"},
		{"directory", func(p string) { os.Mkdir(p, 0o755) }, "directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			tc.make(src)
			var err error
			within(t, 5*time.Second, "LoadTemplate", func() {
				_, err = LoadTemplate("pools.web.service.template[0]", TemplateSpec{Source: src, Destination: "/etc/x.conf"})
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "pools.web.service.template[0].source") || !strings.Contains(err.Error(), src) {
				t.Errorf("got %v, want an error naming the key, %s and %q", err, src, tc.want)
			}
		})
	}
	if _, err := LoadTemplate("k", TemplateSpec{Source: good, Destination: "/etc/x.conf"}); err != nil {
		t.Errorf("a root-owned 0644 template refused: %v", err)
	}
}

// The template rendered 286 MB before: a range over a number is
// now refused when the template is parsed, with the line.
func TestTemplateRangeOverNumber(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`{{range 30000000}}0123456789{{end}}`, "x.tmpl:1: range over the number 30000000"},
		{"a\n{{if .Pool}}\n{{range $i := 5}}{{end}}{{end}}", "x.tmpl:3: range over the number 5"},
		{"{{define \"x\"}}\n{{with .}}{{range 7}}{{end}}{{end}}{{end}}", "x.tmpl:2: range over the number 7"},
	} {
		_, err := ParseTemplate("/etc/x.tmpl", tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.text, err, tc.want)
		}
	}
	if _, err := ParseTemplate("/etc/x.tmpl", nginxTemplate); err != nil {
		t.Errorf("nginx template refused: %v", err)
	}
}

// Rendering is capped: a template that renders the 286 MB
// through a variable fails past 4 MiB, at load (Check) and at publish
// (Render), and quickly.
func TestRenderCapped(t *testing.T) {
	dir := t.TempDir()
	src := writeTemplate(t, dir, "big.tmpl", `{{$n := 30000000}}{{range $n}}0123456789{{end}}`)
	tm, err := LoadTemplate("k", TemplateSpec{Source: src, Destination: "/etc/x.conf"})
	if err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func() error{
		"Check":  func() error { return tm.Check(twoReplicas()) },
		"Render": func() error { _, err := tm.Render(twoReplicas()); return err },
	} {
		var err error
		start := time.Now()
		within(t, 10*time.Second, name, func() { err = run() })
		if err == nil || !strings.Contains(err.Error(), "4 MiB") || !strings.Contains(err.Error(), src) {
			t.Errorf("%s: got %v, want an error naming %s and the 4 MiB cap", name, err, src)
		}
		t.Logf("%s refused in %v", name, time.Since(start))
	}
}

// A template that loops without writing cannot be stopped by its writer:
// the caller is released at the time limit all the same, and the template
// is not run again (one abandoned execution, not one per publish).
func TestRenderTimeLimit(t *testing.T) {
	dir := t.TempDir()
	src := writeTemplate(t, dir, "spin.tmpl", `{{$n := 100000}}{{range $n}}{{range $n}}{{end}}{{end}}`)
	tm, err := LoadTemplate("k", TemplateSpec{Source: src, Destination: "/etc/x.conf"})
	if err != nil {
		t.Fatal(err)
	}
	var rerr error
	within(t, 10*time.Second, "Render of a template that spins", func() { _, rerr = tm.Render(twoReplicas()) })
	if rerr == nil || !strings.Contains(rerr.Error(), "did not finish") || !strings.Contains(rerr.Error(), src) {
		t.Errorf("got %v, want an error naming %s that says it did not finish", rerr, src)
	}
	start := time.Now()
	within(t, 10*time.Second, "second Render", func() { _, rerr = tm.Render(twoReplicas()) })
	if rerr == nil || time.Since(start) > time.Second {
		t.Errorf("second Render: %v after %v, want an error at once", rerr, time.Since(start))
	}
}

// The first publish reads what is at each destination: a FIFO there is an
// error naming the path, never a hang, and a symbolic link is refused
// rather than followed or replaced.
func TestPublishDestinationNotRegular(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"FIFO", mkfifo, "named pipe"},
		{"symbolic link", func(t *testing.T, p string) {
			if err := os.Symlink(filepath.Join(filepath.Dir(p), "target"), p); err != nil {
				t.Fatal(err)
			}
		}, "symbolic link"},
		{"directory", func(t *testing.T, p string) { os.Mkdir(p, 0o755) }, "directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			dest := filepath.Join(f.out, "upstream.conf")
			target := filepath.Join(f.out, "target")
			if err := os.WriteFile(target, []byte("keep\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			tc.make(t, dest)
			var res Result
			var err error
			within(t, 5*time.Second, "Publish", func() { res, err = f.p.Publish(twoReplicas()) })
			if err == nil || !strings.Contains(err.Error(), dest) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error naming %s and %q", err, dest, tc.want)
			}
			if contains(changedPaths(res), "upstream.conf") {
				t.Errorf("reported %s as written", dest)
			}
			if !contains(changedPaths(res), "web.json") {
				t.Errorf("the other outputs were not written: %v", changedPaths(res))
			}
			if b, _ := os.ReadFile(target); string(b) != "keep\n" {
				t.Errorf("the link's target was written: %q", b)
			}
		})
	}
}

// A destination far larger than any output is not read whole: it cannot
// equal what is rendered, and it is replaced.
func TestPublishLargeDestination(t *testing.T) {
	f := newFixture(t)
	dest := filepath.Join(f.out, "upstream.conf")
	if err := os.WriteFile(dest, make([]byte, 5<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := f.p.Publish(twoReplicas())
	if err != nil || !contains(changedPaths(res), "upstream.conf") {
		t.Fatalf("Publish: %v, changed %v", err, changedPaths(res))
	}
	if fi, _ := os.Stat(dest); fi.Size() > 1<<10 {
		t.Errorf("%s still holds %d bytes", dest, fi.Size())
	}
}
