package picture

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/history"
)

// The picture has the three series and the events in its legend, and a
// path per series.
func TestPictureSVG(t *testing.T) {
	pts := []history.Point{
		{Time: time.Unix(0, 0), Pending: 30, Known: true, Live: 1, Target: 3, Action: "scale-up"},
		{Time: time.Unix(10, 0), Pending: 5, Known: true, Live: 3, Target: 3, Action: "stable"},
		{Time: time.Unix(20, 0), Live: 3, Target: 1, Action: "scale-down"},
	}
	path := filepath.Join(t.TempDir(), "h.svg")
	if err := Draw(path, "pool email", pts); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	for _, want := range []string{"<svg", "pool email", "pending", "live workers", "target", "scale-up", "scale-down"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if n := strings.Count(svg, "<path"); n < 3 {
		t.Errorf("%d paths, want at least one per series", n)
	}
	png := filepath.Join(t.TempDir(), "h.png")
	if err := Draw(png, "pool email", pts); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(png); !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Error("not a PNG")
	}
	if err := Draw(filepath.Join(t.TempDir(), "h.gif"), "x", pts); err == nil {
		t.Error("a .gif was accepted")
	}
}
