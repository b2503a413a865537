package discovery

import (
	"os"
	"path/filepath"
	"testing"
)

// Issue 29: a template's empty branch points at the pool's wake address
// (.Wake), and the publish that takes the last replica out renders it, so
// that the load balancer sends there before that replica is stopped.
func TestPublishRendersWakeWhenEmpty(t *testing.T) {
	root := t.TempDir()
	src := writeTemplate(t, root, "up.tmpl", "upstream web {\n{{- range .Leaders}}\n  server {{.HostPort \"http\"}};\n{{- else}}\n  server {{.Wake}};\n{{- end}}\n}\n")
	dst := filepath.Join(root, "up.conf")
	tm, err := LoadTemplate("k", TemplateSpec{Source: src, Destination: dst, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(Options{Pool: "web", Dir: filepath.Join(root, "d"), Templates: []*Template{tm}, Wake: "127.0.0.1:18080"})
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name string
		set  Set
		want string
	}{
		{"one ready replica", NewSet("web", []Replica{{Slot: 1, Unit: "flexiq-web@1.service", Address: "127.0.0.1", Ports: map[string]int{"http": 8001}}}),
			"upstream web {\n  server 127.0.0.1:8001;\n}\n"},
		{"the last one left", NewSet("web", nil), "upstream web {\n  server 127.0.0.1:18080;\n}\n"},
		{"an unsorted set keeps it", Set{Pool: "web", Replicas: []Replica{
			{Slot: 2, Unit: "flexiq-web@2.service", Address: "127.0.0.1", Ports: map[string]int{"http": 8002}},
			{Slot: 1, Unit: "flexiq-web@1.service", Address: "127.0.0.1", Ports: map[string]int{"http": 8001}}}},
			"upstream web {\n  server 127.0.0.1:8001;\n  server 127.0.0.1:8002;\n}\n"},
		{"empty again", NewSet("web", nil).Without(1), "upstream web {\n  server 127.0.0.1:18080;\n}\n"},
	} {
		if _, err := p.Publish(tc.set); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := read(); got != tc.want {
			t.Errorf("%s: rendered %q, want %q", tc.name, got, tc.want)
		}
	}
}
