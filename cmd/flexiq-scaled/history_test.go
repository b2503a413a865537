package main

import (
	"runtime/debug"
	"slices"
	"testing"
)

func TestPlotHelperPaths(t *testing.T) {
	for _, c := range []struct {
		self string
		want []string
	}{
		{"/usr/bin/flexiq-scaled", []string{"/usr/bin/flexiq-scaled-plot", "/usr/libexec/flexiq-scaled/flexiq-scaled-plot"}},
		{"/work/src/bin/flexiq-scaled", []string{"/work/src/bin/flexiq-scaled-plot", "/work/src/libexec/flexiq-scaled/flexiq-scaled-plot"}},
	} {
		if got := plotHelperPaths(c.self); !slices.Equal(got, c.want) {
			t.Errorf("plotHelperPaths(%q) = %q, want %q", c.self, got, c.want)
		}
	}
}

// The daemon's binary must not link gonum/plot (and its fonts): their
// initialisation alone cost the daemon 4 MB of memory at every start.
// Pictures are drawn by the flexiq-scaled-plot helper. This test binary
// links what the command links, so its build info lists the same modules.
func TestNoPlottingLinked(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info in the test binary")
	}
	if len(bi.Deps) == 0 {
		t.Fatal("the build info lists no modules")
	}
	for _, m := range bi.Deps {
		switch m.Path {
		case "gonum.org/v1/plot", "codeberg.org/go-fonts/liberation", "codeberg.org/go-pdf/fpdf":
			t.Errorf("flexiq-scaled links %s: pictures belong to flexiq-scaled-plot", m.Path)
		}
	}
}
