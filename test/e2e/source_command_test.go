package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A command source: a script that prints the counts. It runs in a
// transient unit of its own, with the daemon's sandbox, as the daemon's
// user; a failing or hanging command is a hold, with its stderr in the
// journal, and a hanging one is stopped at the tick's end with everything
// it started, a child that left its process group (setsid) too.
func TestCommandSource(t *testing.T) {
	parallel(t)
	e := setup(t)
	const state = "/var/lib/flexiq-e2e-command/state"
	e.Sh("mkdir -p /var/lib/flexiq-e2e-command")
	e.Write(state, `{"pending": 0, "running": 0}`)
	e.Write("/usr/local/bin/flexiq-e2e-depth", `#!/bin/sh
# The queue's state is in `+state+`: JSON counts, or FAIL, or HANG.
s=$(cat `+state+`)
case "$s" in
FAIL) echo "cannot reach the broker at 10.0.0.9" >&2; exit 2 ;;
HANG) echo "waiting for the broker" >&2; setsid sleep 302 </dev/null >/dev/null 2>&1 & sleep 300 & sleep 301 ;;
*) echo "$s" ;;
esac
`)
	e.Sh("chmod 0755 /usr/local/bin/flexiq-e2e-depth")
	e.Configure(`
[pools.cmd]
exec = ["/bin/sleep", "infinity"]
poll_interval_sec = 1
min_workers = 0
max_workers = 4
target_queue_depth_per_worker = 2
threads_per_worker = 1
target_utilisation = 1.0
scale_down_window_sec = 2
drain_timeout_sec = 5
[pools.cmd.source]
type = "command"
command = ["/usr/local/bin/flexiq-e2e-depth", "--queue", "mail"]
# Longer than the tick: the tick (1 s) bounds it.
timeout_sec = 30
`)
	e.StartDaemon()

	e.Write(state, `{"pending": 6, "running": 0, "oldest_age_sec": 3.5}`)
	e.waitWorkers("cmd", 3, 20*time.Second)
	if out := e.Sh("flexiq-scaled observe cmd"); !strings.Contains(out, `"pending":6`) || !strings.Contains(out, `"oldest_age_sec":3.5`) {
		t.Errorf("observe: %s", out)
	}

	// Failing: a hold, with the command's stderr.
	e.Write(state, "FAIL")
	e.waitSourceError("cmd", "command source /usr/local/bin/flexiq-e2e-depth", "exit status 2", "cannot reach the broker at 10.0.0.9")
	e.holds("cmd", 3, 3*time.Second, "with the command failing")

	// Recovered (the journal logs a source's first error, then at most one
	// a minute: a recovery starts that afresh).
	e.Write(state, `{"pending": 6, "running": 0}`)
	e.Eventually(20*time.Second, "pool cmd's source recovered", func() (bool, string) {
		n := len(e.Entries("FLEXIQ_POOL=cmd", sourceRecoveredID))
		return n > 0, fmt.Sprintf("%d recoveries", n)
	})

	// Hanging: killed at the tick's end, its child too; a hold meanwhile.
	e.Write(state, "HANG")
	e.waitSourceError("cmd", "command source /usr/local/bin/flexiq-e2e-depth", "timed out after", "waiting for the broker")
	e.holds("cmd", 3, 3*time.Second, "with the command hanging")
	e.Write(state, `{"pending": 2, "running": 0}`)
	e.waitWorkers("cmd", 1, 20*time.Second)
	// Nothing the hung commands started is left anywhere, and their units
	// are gone: only a command running right now may be listed.
	e.Eventually(10*time.Second, "no sleep of the command left", func() (bool, string) {
		out := e.Sh(`pgrep -af '[s]leep 30[0-2]' || true`)
		return strings.TrimSpace(out) == "", fmt.Sprintf("processes: %s", out)
	})
	e.Eventually(10*time.Second, "at most one command unit", func() (bool, string) {
		out := strings.TrimSpace(e.Sh(`systemctl list-units --all --plain --no-legend 'flexiq-source-cmd-*'`))
		return strings.Count(out, "flexiq-source-cmd-") <= 1, out
	})
	e.Write(state, `{"pending": 0, "running": 0}`)
	e.waitWorkers("cmd", 0, 20*time.Second)
}
