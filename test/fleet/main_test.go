// Package fleet tests fleet mode (issue 20, "Tests: real hosts on one
// machine") end to end: three hosts, each a sandbox with its own systemd
// in its own network namespace on one bridge, each running the real
// flexiq-scaled, and a fourth sandbox running Debian's redis-server and
// PostgreSQL. Every host runs two fleet pools at once, so that one boot
// serves both stores: bull (BullMQ jobs, enqueued by BullMQ's own client,
// coordinated through the Redis) and river (River jobs, enqueued by
// River's own client, coordinated through the PostgreSQL).
//
// TestFleet runs the faults in order against that one fleet, while
// a sampler records every host's status and the stores' leases and plans
// (a JSONL file in the test's artifact directory, kept with go test
// -artifacts) and checks the invariants all along. The figures are on
// FIGURE lines:
//
//	go test -count=1 -v ./test/fleet/ 2>&1 | grep FIGURE
package fleet

import (
	"fmt"
	"os"
	"testing"

	"github.com/flexiq/flexiq-scaled/test/harness"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// binDir holds the binaries built once per run, in the checkout, which
// every sandbox sees at the same path.
var binDir string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if why := sandbox.NetUnsupported(); why != "" {
		fmt.Fprintln(os.Stderr, "fleet tests skipped: "+why)
		return m.Run()
	}
	// test/clients/river is a module of its own (River stays out of the
	// product's go.mod): it builds in its own directory.
	var err error
	if binDir, err = harness.Build("fleet",
		harness.Bin{Pkg: "./cmd/flexiq-scaled", Name: "flexiq-scaled"},
		harness.Bin{Dir: "test/clients/river", Pkg: ".", Name: "flexiq-river-client"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// sandbox.Main is not used: the package boots four sandboxes of its
	// own; sandbox.Start takes the machine's suite lock for this process.
	return m.Run()
}
