package source

import (
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// Every registered type documents itself and each of its keys, once: the
// reference is generated from these (config.SourceTypeDocs).
func TestSourceTypeDocs(t *testing.T) {
	docs := config.SourceTypeDocs()
	if len(docs) != len(config.SourceTypes()) || len(docs) != len(openers) {
		t.Fatalf("%d tables for %d types (%d openers)", len(docs), len(config.SourceTypes()), len(openers))
	}
	for _, d := range docs {
		if d.Name != "pools.NAME.source" || !strings.HasPrefix(d.Title, "`type = ") || d.Doc == "" {
			t.Errorf("table %q %q: name, title or doc missing (doc %q)", d.Name, d.Title, d.Doc)
		}
		seen := map[string]bool{}
		for _, k := range d.Keys {
			if k.Name == "" || k.Type == "" || k.Doc == "" || seen[k.Name] {
				t.Errorf("%s: key %+v undocumented or twice", d.Title, k)
			}
			seen[k.Name] = true
		}
	}
}
