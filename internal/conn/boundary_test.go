package conn

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/flexiq/flexiq-scaled/"

// The fleet's stores connect through this package, not through the queue
// sources (which they once reached up into for their connections: the
// layering's only back-up arrows); and this package takes nothing of the
// project's but the configuration, so that both sides can import it. The
// controller (its fleet decider, controller/decide) opens a store
// through fleet/stores, the one switch on the kinds. Tests may import what
// they check.
func TestImportBoundary(t *testing.T) {
	forbidden := map[string][]string{
		".":                    {module + "internal/source", module + "internal/fleet", module + "internal/controller"},
		"../fleet/redisstore":  {module + "internal/source", module + "internal/controller"},
		"../fleet/pgstore":     {module + "internal/source", module + "internal/controller"},
		"../fleet":             {module + "internal/source", module + "internal/controller"},
		"../fleet/coord":       {module + "internal/source", module + "internal/controller"},
		"../controller":        {module + "internal/fleet/redisstore", module + "internal/fleet/pgstore"},
		"../controller/decide": {module + "internal/fleet/redisstore", module + "internal/fleet/pgstore"},
	}
	for dir, bad := range forbidden {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, b := range bad {
					if path == b || strings.HasPrefix(path, b+"/") {
						t.Errorf("%s imports %s", f, path)
					}
				}
			}
		}
	}
}
