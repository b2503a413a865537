package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// artefact is something that only some tests need, built outside the
// sandbox: a test binary of another package run inside it, a client, or a
// client's node_modules. TestMain starts building them in the background,
// one at a time (the tests before need a core too), in the order the tests
// need them, so that the builds overlap the tests that run meanwhile
// instead of adding to the run; a test waits for its artefact with need.
// Each is built once per run.
type artefact struct {
	name string
	// dir is where argv runs; the artefact is binDir/name unless argv is npm's.
	dir  string
	argv []string
	// tests are the tests that need it: with -run naming none of them, the
	// background builder leaves it alone (need still builds it if asked).
	tests []string

	once sync.Once
	err  error
}

// artefacts, in the order the tests need them.
var artefacts []*artefact

func defineArtefacts(root string) {
	goBin := func(name, dir, pkg string, test bool, tests ...string) *artefact {
		argv := []string{"go", "build", "-o", filepath.Join(binDir, name), pkg}
		if test {
			argv = []string{"go", "test", "-c", "-o", filepath.Join(binDir, name), pkg}
		}
		return &artefact{name: name, dir: dir, argv: argv, tests: tests}
	}
	npm := func(client string, tests ...string) *artefact {
		return &artefact{name: "npm:" + client, dir: filepath.Join(root, "test/clients", client),
			argv: []string{"npm", "ci", "--no-audit", "--no-fund"}, tests: tests}
	}
	artefacts = []*artefact{
		goBin("flexiq-pgstore.test", root, "./internal/fleet/pgstore", true, "TestFleetPgStore"),
		goBin("flexiq-redisstore.test", root, "./internal/fleet/redisstore", true, "TestFleetRedisStore"),
		goBin("flexiqthreads", root, "./test/clients/flexiqthreads", false, "TestFlexiqPostgresSource", "TestFlexiqRedisSource"),
		npm("pgboss", "TestPostgresSources"),
		npm("graphile-worker", "TestPostgresSources"),
		// test/clients/river is a module of its own (River stays out of
		// the product's go.mod): it builds in its directory, against its
		// own go.mod and go.sum.
		goBin("flexiq-river-client", filepath.Join(root, "test/clients/river"), ".", false, "TestPostgresSources"),
		goBin("flexiq-source.test", root, "./internal/source", true, "TestPostgresSources", "TestRedisWakeUp"),
		npm("bullmq", "TestRedisSources", "TestRedisWakeUp"),
	}
}

// build makes the artefact, once; npm ci only where node_modules is missing.
func (a *artefact) build(ctx context.Context) error {
	a.once.Do(func() {
		if a.argv[0] == "npm" {
			if _, err := os.Stat(filepath.Join(a.dir, "node_modules")); err == nil {
				return
			}
		}
		cmd := exec.CommandContext(ctx, a.argv[0], a.argv[1:]...)
		cmd.Dir = a.dir
		if a.argv[0] == "go" {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			a.err = fmt.Errorf("%s (in %s): %v\n%s", strings.Join(a.argv, " "), a.dir, err, out)
		}
	})
	return a.err
}

// buildInBackground builds, in order, the artefacts of the tests that -run
// selects, until ctx ends; wait returns once it has stopped.
func buildInBackground(ctx context.Context) (wait func()) {
	var selected *regexp.Regexp
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		// The top-level part of the pattern, as the testing package splits it.
		selected, _ = regexp.Compile(strings.Split(f.Value.String(), "/")[0])
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, a := range artefacts {
			if ctx.Err() != nil {
				return
			}
			if selected == nil || anyMatch(selected, a.tests) {
				a.build(ctx) // a failure is reported by need, to the test
			}
		}
	}()
	return func() { <-done }
}

func anyMatch(re *regexp.Regexp, names []string) bool {
	for _, n := range names {
		if re.MatchString(n) {
			return true
		}
	}
	return false
}

// need waits for the named artefact (building it now if the background
// builder has not) and returns its path; a failed build fails t.
func need(t testing.TB, name string) string {
	t.Helper()
	for _, a := range artefacts {
		if a.name == name {
			if err := a.build(context.Background()); err != nil {
				t.Fatalf("building %s: %v", name, err)
			}
			if strings.HasPrefix(name, "npm:") {
				return a.dir
			}
			return filepath.Join(binDir, name)
		}
	}
	t.Fatalf("no artefact %s", name)
	return ""
}
