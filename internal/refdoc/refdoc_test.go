package refdoc

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The committed reference must be what the KeyDocs generate: a key's words
// are changed in internal/config, and `make docs` brings the files along.
func TestCommittedDocsMatch(t *testing.T) {
	files, err := Files(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range slices.Sorted(maps.Keys(files)) {
		got, err := os.ReadFile(filepath.Join("..", "..", path))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != files[path] {
			t.Errorf("%s is stale: run make docs", path)
		}
	}
}
