package replicas

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/discovery"
)

// A reload parses the templates afresh: the same ones are not a change,
// an edited text or another command is.
func TestSameTemplates(t *testing.T) {
	dir := t.TempDir()
	load := func(text string, after []string) *discovery.Template {
		src := filepath.Join(dir, fmt.Sprintf("t%d.tmpl", len(text)+len(after)))
		os.WriteFile(src, []byte(text), 0o644)
		cmd, err := discovery.NewCommand("after", after, 0)
		if err != nil {
			t.Fatal(err)
		}
		tm, err := discovery.LoadTemplate("template[0]", discovery.TemplateSpec{Source: src, Destination: filepath.Join(dir, "out"), After: &cmd})
		if err != nil {
			t.Fatal(err)
		}
		tm.Spec.Source = "/same/source"
		return tm
	}
	reload := []string{"/usr/bin/systemctl", "reload", "nginx"}
	a := load("x", reload)
	for _, tc := range []struct {
		name string
		b    *discovery.Template
		same bool
	}{
		{"parsed again", load("x", reload), true},
		{"text edited", load("xy", reload), false},
		{"another command", load("x", []string{"/usr/bin/systemctl", "reload", "haproxy"}), false},
	} {
		if got := SameTemplates([]*discovery.Template{a}, []*discovery.Template{tc.b}); got != tc.same {
			t.Errorf("%s: SameTemplates = %v, want %v", tc.name, got, tc.same)
		}
	}
}
