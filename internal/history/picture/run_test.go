package picture

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/workload/tickcsv"
)

// A run's picture has its title, its four series in the legends and a path
// per series; --format wins over the file's name.
func TestDrawRun(t *testing.T) {
	ticks := []tickcsv.Row{
		{T: 0, Pending: 30, Running: 1, Live: 1},
		{T: 5, Pending: 12, Running: 4, Live: 4, Draining: 1},
		{T: 10, Pending: 0, Running: 2, Live: 2},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "run.svg")
	if err := DrawRun(path, "", "pool code\nworker-seconds 42", ticks); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	for _, want := range []string{"<svg", "pool code", "worker-seconds 42", "pending jobs", "running jobs", "live + draining", "live workers"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if n := strings.Count(svg, "<path"); n < 4 {
		t.Errorf("%d paths, want at least one per series", n)
	}
	odd := filepath.Join(dir, "run.png")
	if err := DrawRun(odd, "svg", "t", ticks); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(odd); !bytes.Contains(b, []byte("<svg")) {
		t.Error("--format svg did not draw SVG")
	}
	png := filepath.Join(dir, "run2.png")
	if err := DrawRun(png, "", "t", ticks); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(png); !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Error("not a PNG")
	}
	if err := DrawRun(filepath.Join(dir, "x.gif"), "", "t", ticks); err == nil || !strings.Contains(err.Error(), "want a .svg or .png") {
		t.Errorf("gif: %v", err)
	}
	if err := DrawRun(filepath.Join(dir, "y.svg"), "", "t", nil); err == nil || !strings.Contains(err.Error(), "no ticks") {
		t.Errorf("no ticks: %v", err)
	}
}
