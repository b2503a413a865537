// Package servers starts the queue servers that the sources read, from
// Debian's own packages, as the systemd services they are, inside a test's
// sandbox: redis-server, PostgreSQL and Prometheus. scripts/deps.sh installs
// the packages on the host with their services kept from starting; the
// sandbox's root is an overlay of the host's, so the services, their units
// and their data directories are there, and whatever a test writes stays in
// the sandbox. The servers listen on the sandbox's own loopback, which no
// process outside it can reach.
package servers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// start starts a unit (verb "start", or "restart" to apply a new
// configuration to a running server) and waits until ready succeeds inside
// the sandbox.
func start(t testing.TB, sb *sandbox.Sandbox, verb, unit string, ready ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := sb.Exec(ctx, "systemctl", verb, unit); err != nil {
		status, _ := sb.Exec(ctx, "sh", "-c", "systemctl status --no-pager "+unit+"; journalctl --no-pager -n 30 -u "+unit)
		t.Fatalf("starting %s: %v\n%s\n%s", unit, err, out, status)
	}
	if len(ready) == 0 {
		return
	}
	var last string
	ok, _ := sandbox.Eventually(30*time.Second, func() (bool, string) {
		out, err := sb.Exec(ctx, ready...)
		last = fmt.Sprintf("%v: %s", err, out)
		return err == nil, last
	})
	if !ok {
		t.Fatalf("%s did not become ready (%s): %s", unit, strings.Join(ready, " "), last)
	}
}

// Redis starts redis-server.service and returns its URL. The server runs
// as Debian configures it: on 127.0.0.1:6379 and ::1, no password, no
// keyspace notifications.
func Redis(t testing.TB, sb *sandbox.Sandbox) string {
	t.Helper()
	start(t, sb, "start", "redis-server.service", "redis-cli", "ping")
	return "redis://127.0.0.1:6379"
}

// RedisCLI runs redis-cli with args inside the sandbox.
func RedisCLI(t testing.TB, sb *sandbox.Sandbox, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := sb.Exec(ctx, append([]string{"redis-cli"}, args...)...)
	if err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

// Postgres starts the host's PostgreSQL cluster (Debian's
// postgresql@VERSION-main.service), creates a role and a database named
// name with password as its password, and returns a URL without the
// password, as a configuration would hold it.
func Postgres(t testing.TB, sb *sandbox.Sandbox, name, password string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := sb.Exec(ctx, "sh", "-c", "pg_lsclusters -h | awk '{print $1\"-\"$2; exit}'")
	cluster := strings.TrimSpace(out)
	if err != nil || cluster == "" {
		t.Fatalf("no PostgreSQL cluster (is postgresql installed? scripts/deps.sh installs it): %v %s", err, out)
	}
	start(t, sb, "start", "postgresql@"+cluster+".service", "runuser", "-u", "postgres", "--", "pg_isready", "-q")
	PSQL(t, sb, "postgres", fmt.Sprintf(`DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%[1]s') THEN CREATE ROLE %[1]s LOGIN PASSWORD '%[2]s'; END IF;
END $$;`, name, password))
	if PSQL(t, sb, "postgres", fmt.Sprintf("SELECT 1 FROM pg_database WHERE datname = '%s'", name)) == "" {
		PSQL(t, sb, "postgres", fmt.Sprintf("CREATE DATABASE %s OWNER %s", name, name))
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:5432/%s?sslmode=disable", name, name)
}

// PSQL runs sql as the postgres superuser in database db inside the
// sandbox, and returns its unaligned, tuples-only output.
func PSQL(t testing.TB, sb *sandbox.Sandbox, db, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := sb.Exec(ctx, "runuser", "-u", "postgres", "--", "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql)
	if err != nil {
		t.Fatalf("psql %s: %v\n%s", sql, err, out)
	}
	return strings.TrimSpace(out)
}

// Prometheus starts prometheus.service with the given scrape configuration
// (the scrape_configs list, as YAML) and a scrape interval, and returns its
// URL once it answers.
func Prometheus(t testing.TB, sb *sandbox.Sandbox, scrapeConfigs string, interval time.Duration) string {
	t.Helper()
	cfg := fmt.Sprintf("global:\n  scrape_interval: %s\n  evaluation_interval: %s\nscrape_configs:\n%s", interval, interval, scrapeConfigs)
	if err := sb.WriteFile("/etc/prometheus/prometheus.yml", cfg); err != nil {
		t.Fatal(err)
	}
	start(t, sb, "restart", "prometheus.service", "curl", "-sf", "http://127.0.0.1:9090/-/ready")
	return "http://127.0.0.1:9090"
}

// RedisOn starts redis-server.service in a sandbox that is on a
// sandbox.Net (the fleet tests' server sandbox) so that the other
// sandboxes on the net reach it, and returns its URL there. Debian's
// configuration binds 127.0.0.1 and ::1 and refuses clients from other
// addresses (protected mode): the sandbox's copy of redis.conf gets the
// sandbox's address as well, and protected mode off, since the net reaches
// nothing but its own sandboxes.
func RedisOn(t testing.TB, sb *sandbox.Sandbox) string {
	t.Helper()
	ip := sb.IP()
	if !ip.IsValid() {
		t.Fatalf("RedisOn: sandbox %s is on no network (sandbox.Options.Network)", sb.Name)
	}
	// Later directives override earlier ones in redis.conf.
	sb.Sh(t, fmt.Sprintf("printf '\\n# flexiq fleet tests\\nbind 127.0.0.1 -::1 %s\\nprotected-mode no\\n' >> /etc/redis/redis.conf", ip))
	start(t, sb, "restart", "redis-server.service", "redis-cli", "-h", ip.String(), "ping")
	return fmt.Sprintf("redis://%s:6379", ip)
}

// PostgresOn is Postgres in a sandbox on a sandbox.Net: the server also
// listens on the sandbox's address and accepts password logins (SCRAM)
// from the whole net. It returns the URL at that address, without the
// password.
func PostgresOn(t testing.TB, sb *sandbox.Sandbox, name, password string) string {
	t.Helper()
	ip := sb.IP()
	if !ip.IsValid() {
		t.Fatalf("PostgresOn: sandbox %s is on no network (sandbox.Options.Network)", sb.Name)
	}
	// Debian's postgresql.conf includes conf.d; pg_hba.conf takes the first
	// matching line, and its own lines match only local and loopback clients.
	sb.Sh(t, fmt.Sprintf(`for d in /etc/postgresql/*/main; do
  printf "listen_addresses = '127.0.0.1,%s'\n" > "$d/conf.d/flexiq-net.conf"
  printf 'host all all %s scram-sha-256\n' >> "$d/pg_hba.conf"
done`, ip, sb.NetAddr.Masked()))
	Postgres(t, sb, name, password)
	return fmt.Sprintf("postgres://%s@%s:5432/%s?sslmode=disable", name, ip, name)
}
