package hostcheck

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// config parses and validates the file; what needs this machine's users,
// programs, mounts or cgroups is this package's. config's non-test files
// import none of the packages that ask the machine.
func TestConfigAsksNotTheMachine(t *testing.T) {
	hostOnly := []string{"os/user", "os/exec", "github.com/prometheus/procfs"}
	files, err := filepath.Glob("../config/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("config's files: %v %v", files, err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range hostOnly {
				if path == bad {
					t.Errorf("%s imports %s: checks against the machine belong in internal/hostcheck", file, path)
				}
			}
		}
	}
}
