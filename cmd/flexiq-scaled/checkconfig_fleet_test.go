package main

import (
	"slices"
	"strings"
	"testing"
)

// check-config prints a fleet's problems as the loader names them, and
// a good fleet's tables in the effective configuration.
func TestCheckConfigFleet(t *testing.T) {
	bad := writeFile(t, "config.toml", `
[fleet]
url = "redis://127.0.0.1:6379/0"
host_id = "web-1"
heartbeat_sec = 10

[pools.email]
app = "myapp.tasks:queue"
target_cpu_utilisation = 0.7
[pools.email.source]
path = "/var/lib/flexiq/flexiq.db"
[pools.email.fleet]
capacity = 0
`)
	r := invoke(t, "check-config", bad)
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("check-config of a bad fleet: want exit 1 and no output, got %v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	for _, want := range []string{
		bad + ": fleet.heartbeat_sec: heartbeat_sec (10) must be at most half of ttl_sec (15): a host is gone after about 3 missed heartbeats, " +
			"and the lease must outlive two of them; the coordinator refuses more",
		bad + `: pools.email.fleet.capacity: must be >= 1, or "auto"`,
		bad + ": pools.email.target_cpu_utilisation: not in a pool that joins a fleet: worker CPU is not coordinated across hosts, " +
			"and the leader would scale every host on its own workers' CPU; leave it out, or the pool's [pools.email.fleet]",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("stderr lacks the line %q:\n%s", want, r.stderr)
		}
	}

	userName, groupName := identity(t)
	good := writeFile(t, "config.toml", `
[fleet]
url = "redis://127.0.0.1:6379/0"
host_id = "web-1"

[pools.email]
exec = ["/bin/sh", "-c", "exec sleep infinity"]
user = "`+userName+`"
group = "`+groupName+`"
max_workers = 4
[pools.email.source]
path = "/nonexistent/flexiq.db"
[pools.email.fleet]
ttl_sec = 30
`)
	r = invoke(t, "check-config", good)
	if r.code != 0 {
		t.Fatalf("check-config of a good fleet: %v", r)
	}
	for _, want := range []string{"[fleet]", `host_id = "web-1"`, "[pools.email.fleet]", `capacity = "auto"`, "ttl_sec = 30.0", "renew_sec = 10.0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("effective config lacks %q:\n%s", want, r.stdout)
		}
	}
}
