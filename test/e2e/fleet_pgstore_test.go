package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
	"github.com/flexiq/flexiq-scaled/test/servers"
)

// TestFleetPgStore runs internal/fleet/pgstore's tests against Debian's
// PostgreSQL inside the sandbox (issue 20's PostgreSQL store): the test
// binary runs in the sandbox, where the server listens, and restarts the
// server's unit itself for the restart test. FLEXIQ_FLEET_PG_RUN narrows
// the tests (a -test.run pattern); FLEXIQ_FLEET_PG_BENCH=1 adds the
// benchmarks (the store's traffic per tick).
func TestFleetPgStore(t *testing.T) {
	sb := sandbox.Get(t)
	const db, password = "fqfleet", "fleet-pw"
	url := servers.Postgres(t, sb, db, password)
	full := strings.Replace(url, db+"@", db+":"+password+"@", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cluster, err := sb.Exec(ctx, "sh", "-c", "pg_lsclusters -h | awk '{print $1\"-\"$2; exit}'")
	if err != nil {
		t.Fatal(err)
	}
	unit := "postgresql@" + strings.TrimSpace(cluster) + ".service"

	bin := need(t, "flexiq-pgstore.test")
	run := os.Getenv("FLEXIQ_FLEET_PG_RUN")
	if run == "" {
		run = "^TestPg"
	}
	argv := []string{"env", "FLEXIQ_TEST_PG_URL=" + full, "FLEXIQ_TEST_PG_UNIT=" + unit,
		bin, "-test.run", run, "-test.v", "-test.count=1", "-test.timeout=3m"}
	if os.Getenv("FLEXIQ_FLEET_PG_BENCH") != "" {
		// The traffic figures (statements and time per tick).
		argv = append(argv, "-test.bench", "^BenchmarkPg", "-test.benchtime", "50x")
	}
	out, err := sb.Exec(ctx, argv...)
	t.Log(out)
	if err != nil {
		t.Fatalf("internal/fleet/pgstore's tests in the sandbox: %v", err)
	}
	if strings.Contains(out, "--- SKIP") || !strings.Contains(out, "--- PASS: TestPg") {
		t.Fatalf("internal/fleet/pgstore's tests skipped or did not run")
	}
}
