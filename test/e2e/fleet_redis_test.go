package e2e

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
	"github.com/flexiq/flexiq-scaled/test/servers"
)

// The fleet's Redis store (internal/fleet/redisstore, issue 20) against
// Debian's redis-server: its package's tests run inside the sandbox, where
// the server listens, and stop and start the server's unit there. Lease
// with the server's expiry, the paused leader fenced, release, members
// aged by the server's clock, the plan, one command per method, a server
// restart and a data loss.
func TestFleetRedisStore(t *testing.T) {
	sb := sandbox.Get(t)
	url := servers.Redis(t, sb)
	bin := need(t, "flexiq-redisstore.test")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := sb.Exec(ctx, "env", "FLEXIQ_TEST_REDIS_URL="+url, "FLEXIQ_TEST_REDIS_UNIT=redis-server.service",
		bin, "-test.run", "^TestRedis", "-test.v", "-test.count=1", "-test.timeout=2m")
	names := []string{"TestRedisLease", "TestRedisPausedLeader", "TestRedisRelease", "TestRedisMembers",
		"TestRedisPlan", "TestRedisRoundTrips", "TestRedisServerRestart", "TestRedisDataLoss", "TestRedisACL",
		"TestRedisACLWorkerDenied", "TestRedisHostileWrites"}
	for _, name := range names {
		if !regexp.MustCompile(`--- PASS: ` + name + ` `).MatchString(out) {
			t.Errorf("internal/fleet/redisstore's %s did not pass", name)
		}
	}
	if err != nil || t.Failed() {
		t.Fatalf("internal/fleet/redisstore's tests: %v\n%s", err, out)
	}
	for _, line := range regexp.MustCompile(`FIGURE .*`).FindAllString(out, -1) {
		t.Log(line)
	}
}
