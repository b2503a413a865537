// Package version holds the version of flexiq-scaled, stamped in at build
// time, and formats it for `flexiq-scaled version` and the daemon's log.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set by the release build:
//
//	go build -ldflags "-X github.com/flexiq/flexiq-scaled/internal/version.Version=1.2.3" ./cmd/flexiq-scaled
//
// It is a var, not a const, because -X can only set string variables.
var Version = "dev"

// String returns the program's name, version, toolchain and platform, e.g.
// "flexiq-scaled 1.2.3 (go1.26.8, linux/amd64)". The toolchain is included
// because it decides which Go security fixes a binary carries.
func String() string {
	return fmt.Sprintf("flexiq-scaled %s (%s, %s/%s)", effective(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// effective is Version, or, in a build that was not stamped, the module
// version the go command recorded, so that `go install
// github.com/flexiq/flexiq-scaled/cmd/flexiq-scaled@v1.2.3` still reports
// v1.2.3 rather than "dev".
func effective() string {
	if Version != "dev" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return Version
}
