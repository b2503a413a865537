package services

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// probeIDScript is a command probe that leaves a file named after the uid
// and gid it ran as, and passes.
const probeIDScript = `#!/bin/sh
: > "$1/uid-$(/usr/bin/id -u)-gid-$(/usr/bin/id -g)"
`

// TestCommandProbeRunsAsPoolUser is issue 27's item 2: a command readiness
// probe runs as the pool's user (here nobody, uid and gid 65534), not as
// root, unless the readiness table says user = "root". On the code before
// it, every probe ran as root (uid-0-gid-0).
func TestCommandProbeRunsAsPoolUser(t *testing.T) {
	t.Parallel() // measures nothing: beside the others that do not (package doc)
	e := boot(t)
	pool := func(name, probeUser string) string {
		return `
[pools.` + name + `]
exec = ["/bin/sleep", "infinity"]
user = "nobody"
min_workers = 1
max_workers = 1
poll_interval_sec = 1
target_cpu_utilisation = 0.8

[pools.` + name + `.service]

[pools.` + name + `.service.readiness]
type = "command"
command = ["/usr/local/bin/flexiq-test-probe-id", "/run/probe-id/` + name + `"]
period_sec = 1
` + probeUser
	}
	e.Sh("mkdir -p /run/probe-id/web /run/probe-id/rootprobe && chmod 0777 /run/probe-id/web /run/probe-id/rootprobe")
	e.Write("/usr/local/bin/flexiq-test-probe-id", probeIDScript)
	e.Sh("chmod 0755 /usr/local/bin/flexiq-test-probe-id")
	e.configure(pool("web", "")+pool("rootprobe", `user = "root"`+"\n"), nil)
	e.StartDaemon()
	e.waitDiscovered("web", 1, 30*time.Second)
	e.waitDiscovered("rootprobe", 1, 30*time.Second)
	for name, want := range map[string]string{"web": "uid-65534-gid-65534", "rootprobe": "uid-0-gid-0"} {
		if got := strings.Fields(e.Sh("ls /run/probe-id/" + name)); len(got) != 1 || got[0] != want {
			t.Errorf("pool %s: the probe ran as %q, want only %s", name, got, want)
		}
	}
	// Its units are named for what they run (they were flexiq-source-*).
	started := e.Sh(`journalctl -q -o cat _PID=1 | grep -o 'Started flexiq-[a-z]*-web-' | sort | uniq -c || true`)
	if !strings.Contains(started, "Started flexiq-probe-web-") || strings.Contains(started, "flexiq-source-web-") {
		t.Errorf("the probe's units, as systemd started them: want flexiq-probe-web-*, only:\n%s", started)
	}
	if out := e.CLI("check-config"); !regexp.MustCompile(`(?m)^warning: .*pools\.rootprobe\.service\.readiness\.user: `).MatchString(out) {
		t.Errorf("check-config warns of no probe run as root while the workers run as nobody:\n%s", out)
	}
}
