package api

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/flexiq/flexiq-scaled/"

// The readers of the wire types take them from here, not from the
// controller: its structs are its own business (issue 18). And api itself
// imports nothing of the project's, so that importing it costs nothing.
// The daemon still imports the controller, to run the pools; cmd reaches it
// only through the daemon.
func TestImportBoundary(t *testing.T) {
	forbidden := map[string][]string{
		".":                       {module},
		"../control":              {module + "internal/controller"},
		"../metrics":              {module + "internal/controller"},
		"../../cmd/flexiq-scaled": {module + "internal/controller"},
	}
	for dir, bad := range forbidden {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, b := range bad {
					if path == b || strings.HasPrefix(path, b) && strings.HasSuffix(b, "/") {
						t.Errorf("%s imports %s", f, path)
					}
				}
			}
		}
	}
}
