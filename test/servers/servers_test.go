package servers

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

func TestMain(m *testing.M) { os.Exit(sandbox.Main(m, sandbox.Options{Name: "servers"})) }

// Each server starts inside the sandbox from Debian's package and answers
// on the sandbox's loopback.
func TestServersStart(t *testing.T) {
	sb := sandbox.Get(t)
	if url := Redis(t, sb); url != "redis://127.0.0.1:6379" {
		t.Errorf("redis URL %q", url)
	}
	RedisCLI(t, sb, "SET", "k", "v")
	if got := RedisCLI(t, sb, "GET", "k"); got != "v" {
		t.Errorf("redis GET = %q", got)
	}
	url := Postgres(t, sb, "queue", "pw")
	if !strings.HasPrefix(url, "postgres://queue@127.0.0.1:5432/queue") {
		t.Errorf("postgres URL %q", url)
	}
	PSQL(t, sb, "queue", "CREATE TABLE IF NOT EXISTS t (x int); INSERT INTO t VALUES (1)")
	if got := PSQL(t, sb, "queue", "SELECT count(*) FROM t"); got != "1" {
		t.Errorf("postgres count = %q", got)
	}
	prom := Prometheus(t, sb, "  - job_name: self\n    static_configs:\n      - targets: ['127.0.0.1:9090']\n", 2*time.Second)
	ok, state := sandbox.Eventually(30*time.Second, func() (bool, string) {
		out, _ := sb.Exec(t.Context(), "curl", "-sf", prom+"/api/v1/query?query=up")
		return strings.Contains(out, `"value"`), out
	})
	if !ok {
		t.Errorf("prometheus never scraped itself: %s", state)
	}
}
