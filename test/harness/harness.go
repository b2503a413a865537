// Package harness is what the sandbox suites (test/e2e, test/faults,
// test/services, test/fleet, test/debtest) share: building the binaries
// they install, booting sandboxes tied to the test, installing the daemon
// with a test drop-in, and Env, one test's handle on a sandbox (shell
// commands, files, the daemon's configuration, units, the journal, waiting,
// FIGURE lines). Each suite keeps only what is its own: its pools, its
// fixtures, its way of sharing sandboxes between tests.
//
// The machine-wide lock that keeps sandbox suites one at a time is taken by
// sandbox.Start (test/sandbox/lock.go); nothing here goes around it.
package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// DaemonUnit is the daemon's unit, as systemd/ ships it.
const DaemonUnit = "flexiq-scaled.service"

// Bin is one binary a suite builds before its tests.
type Bin struct {
	// Pkg is the package to build, relative to Dir.
	Pkg string
	// Name is the binary's name in the suite's directory.
	Name string
	// Dir is the directory to build in, relative to the module root: a
	// module of its own (test/clients/river); "" is the module root.
	Dir string
}

// Build builds bins, side by side, statically, into bin/SUITE of the
// checkout (which every sandbox sees at the same path), and returns that
// directory.
func Build(suite string, bins ...Bin) (string, error) {
	root, err := sandbox.ModuleRoot()
	if err != nil {
		return "", err
	}
	binDir := filepath.Join(root, "bin", suite)
	errs := make(chan error, len(bins))
	for _, b := range bins {
		go func() {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, b.Name), b.Pkg)
			cmd.Dir, cmd.Env = filepath.Join(root, b.Dir), append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("building %s: %v\n%s", b.Name, err, out)
				return
			}
			errs <- nil
		}()
	}
	var first error
	for range bins {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return binDir, first
}

// Exec runs argv inside sb, for at most within, and returns its combined
// output and error without failing any test.
func Exec(sb *sandbox.Sandbox, within time.Duration, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return sb.Exec(ctx, argv...)
}

// Journal is sb's journal, read by journalctl with args, in the readable
// short-monotonic form; "" when it cannot be read.
func Journal(sb *sandbox.Sandbox, args ...string) string {
	out, _ := Exec(sb, time.Minute, append([]string{"journalctl", "--no-pager", "-o", "short-monotonic"}, args...)...)
	return out
}
