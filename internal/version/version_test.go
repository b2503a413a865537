package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "1.2.3"
	want := "flexiq-scaled 1.2.3 (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if got := String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestStringUnstamped(t *testing.T) {
	// A test binary has no module version, so an unstamped build says "dev".
	if got := String(); !strings.HasPrefix(got, "flexiq-scaled ") || !strings.Contains(got, "("+runtime.Version()) {
		t.Errorf("String() = %q, want the name, a version and the toolchain", got)
	}
}
