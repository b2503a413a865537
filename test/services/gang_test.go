package services

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/eventlog"
)

// rankScript runs the test service as a rank, and fails rank 1 at once
// while /run/flexiq-test-fail-rank1 exists: a rank whose command fails.
const rankScript = `#!/bin/sh
if [ "$FLEXIQ_RANK" = 1 ] && [ -e /run/flexiq-test-fail-rank1 ]; then
	echo "rank 1 told to fail"
	exit 3
fi
exec /usr/local/bin/flexiq-testservice -ready-after 2s
`

const gangPool = `
[pools.gang]
exec = ["/usr/local/bin/flexiq-test-rank"]
min_workers = 1
max_workers = 2
poll_interval_sec = 1
# A service without a queue scales on its CPU (and here on pins).
target_cpu_utilisation = 0.8

[pools.gang.service]
group_size = 3

[pools.gang.service.ports]
http = "auto"

[pools.gang.service.readiness]
type = "http"
path = "/health"
port = "http"
period_sec = 1
`

// TestGangGroups: a group of 3 starts all or nothing, a rank's exit stops
// the group through systemd's dependencies while the daemon is down, and
// the daemon re-places the group and publishes it only once rank 0 is
// ready again.
func TestGangGroups(t *testing.T) {
	e := boot(t)
	e.configure(gangPool, map[string]string{"/usr/local/bin/flexiq-test-rank": rankScript})
	e.Sh("chmod 0755 /usr/local/bin/flexiq-test-rank")
	e.StartDaemon()
	leaders := func() []replica {
		rs, err := e.discovered("gang")
		if err != nil {
			t.Fatal(err)
		}
		var out []replica
		for _, r := range rs {
			if r.Rank == 0 {
				out = append(out, r)
			}
		}
		return out
	}
	e.Eventually(30*time.Second, "the group in discovery", func() (bool, string) {
		l := leaders()
		return len(l) == 1, strings.TrimSpace(e.Sh("cat /run/flexiq-scaled/discovery/gang.json 2>/dev/null || true"))
	})
	ranks := []string{"flexiq-gang@1.service", "flexiq-gang@1-r1.service", "flexiq-gang@1-r2.service"}
	for r, u := range ranks {
		env := e.Sh("systemctl show -p Environment --value " + u)
		for _, want := range []string{"FLEXIQ_RANK=" + strconv.Itoa(r), "FLEXIQ_GROUP_SIZE=3", "FLEXIQ_PEERS_HTTP=127.0.0.1:", "FLEXIQ_SCALED_SLOT=1"} {
			if !strings.Contains(env, want) {
				t.Errorf("%s: environment %q lacks %s", u, env, want)
			}
		}
	}

	// Rank 1 killed while the daemon is down: ranks 0 and 2 stop, by
	// systemd alone.
	e.Write("/etc/systemd/system/flexiq-scaled.service.d/60-norestart.conf", "[Service]\nRestart=no\n")
	e.Sh("systemctl daemon-reload; systemctl kill -s SIGKILL " + daemonUnit + "; sleep 0.5; systemctl is-active " + daemonUnit + " || true")
	took := e.Sh(`pid=$(systemctl show -p MainPID --value flexiq-gang@1-r1.service)
t0=$(date +%s%N); kill -9 "$pid"
while systemctl is-active -q flexiq-gang@1.service || systemctl is-active -q flexiq-gang@1-r2.service; do
	sleep 0.01
	[ $(( $(date +%s%N) - t0 )) -gt 10000000000 ] && break
done
echo $(( $(date +%s%N) - t0 ))`)
	ns, err := strconv.ParseInt(strings.TrimSpace(took), 10, 64)
	if err != nil {
		t.Fatalf("timing the group's stop: %q", took)
	}
	e.figure("gang-rank-exit", "ranks_0_and_2_inactive_after", time.Duration(ns))
	if time.Duration(ns) >= 10*time.Second {
		t.Fatalf("ranks 0 and 2 still active 10 s after rank 1 was killed with the daemon down")
	}

	// The daemon back: one event for the group, the group re-placed, and
	// in discovery only once rank 0 is ready (2 s after its start).
	e.Sh("rm /etc/systemd/system/flexiq-scaled.service.d/60-norestart.conf; systemctl daemon-reload; systemctl reset-failed " + daemonUnit + "; systemctl start " + daemonUnit)
	start := time.Now()
	since := strings.TrimSpace(e.Sh("date +%s"))
	e.Eventually(30*time.Second, "the group re-placed and in discovery", func() (bool, string) {
		if len(leaders()) != 1 {
			return false, e.Sh("systemctl list-units --all --plain --no-legend 'flexiq-gang@*' || true")
		}
		// Rank 0 says "ready" when its /health turns 200 (2 s after its
		// start): the group must not be in discovery before that.
		if j := e.Sh("journalctl --no-pager -u flexiq-gang@1.service --since=@" + since + " | grep -c ' ready' || true"); strings.TrimSpace(j) == "0" {
			t.Errorf("the group is in discovery before its rank 0 is ready")
		}
		return true, ""
	})
	e.figure("gang-replace", "back_in_discovery_after", time.Since(start))
	e.groupCrashNames(since, "flexiq-gang@1-r1.service", "signal")
	active := e.Sh("systemctl show -p ActiveEnterTimestampMonotonic --value flexiq-gang@1.service")
	if strings.TrimSpace(active) == "0" {
		t.Error("the group is in discovery but its rank 0 is not active")
	}

	// All or nothing: rank 1 fails at start, no rank of the group stays.
	e.Sh("touch /run/flexiq-test-fail-rank1")
	e.CLI("pin", "gang", "2")
	// Each retry of the failing group runs its ranks for the few
	// milliseconds until rank 1 exits; none may stay up. Sampled every
	// 100 ms over two backoff rounds.
	streak, worst := 0, 0
	for i := 0; i < 80; i++ {
		up := 0
		for _, u := range e.Workers("gang", "active", "activating") {
			if strings.HasPrefix(u, "flexiq-gang@2") {
				up++
			}
		}
		if up > 0 {
			streak++
		} else {
			streak = 0
		}
		worst = max(worst, streak)
		time.Sleep(100 * time.Millisecond)
	}
	if worst > 5 {
		t.Fatalf("ranks of the failing group stayed up for %d samples in a row (100 ms apart)", worst)
	}
	if l := leaders(); len(l) != 1 {
		t.Errorf("discovery lists %d groups; want only the healthy one", len(l))
	}
	if j := e.Sh("journalctl --no-pager -u " + daemonUnit + " | grep -iE 'rank 1' || true"); !strings.Contains(j, "rank 1") {
		t.Errorf("the journal does not name the rank that failed:\n%s", e.Sh("journalctl --no-pager -n 40 -u "+daemonUnit))
	}
	e.Sh("rm /run/flexiq-test-fail-rank1")
	e.Eventually(90*time.Second, "the second group after its backoff", func() (bool, string) {
		l := leaders()
		return len(l) == 2, strings.Join(e.Workers("gang", "active", "activating"), " ")
	})

	// Rank 1's main process killed with the daemon running (issue 27,
	// item 5): BindsTo= stops ranks 0 and 2, the listing's rank 0 then
	// stands for the group with rank 1's Result, and the entry must still
	// name rank 1, not rank 0.
	victim := ""
	for _, u := range e.Workers("gang", "active") {
		if strings.HasSuffix(u, "-r1.service") {
			victim = u
			break
		}
	}
	if victim == "" {
		t.Fatalf("no rank 1 active: %v", e.Workers("gang"))
	}
	since = strings.TrimSpace(e.Sh("date +%s"))
	e.Sh("systemctl kill --signal=SIGKILL --kill-whom=main " + victim)
	e.groupCrashNames(since, victim, "signal")
}

// groupCrashNames waits for the daemon's entry of a gang group's crash
// (eventlog.WorkerCrashed, naming a rank) since the Unix time since, and
// checks that it names unit as the rank that failed, with result.
func (e *env) groupCrashNames(since, unit, result string) {
	e.T.Helper()
	var got []string
	e.Eventually(30*time.Second, "the group's crash entry", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		entries, err := e.SB.Journal(ctx, "--since=@"+since, "MESSAGE_ID="+string(eventlog.WorkerCrashed), "FLEXIQ_POOL=gang")
		if err != nil {
			return false, err.Error()
		}
		got = got[:0]
		for _, en := range entries {
			// A failed start is the same kind, and names its rank too.
			if strings.Contains(en.Field("MESSAGE"), "stopped without being asked") {
				got = append(got, en.Field("MESSAGE")+" [FLEXIQ_RANK_UNIT="+en.Field("FLEXIQ_RANK_UNIT")+" FLEXIQ_RESULT="+en.Field("FLEXIQ_RESULT")+"]")
			}
		}
		return len(got) > 0, strings.Join(got, "; ")
	})
	if len(got) != 1 || !strings.Contains(got[0], "FLEXIQ_RANK_UNIT="+unit+" FLEXIQ_RESULT="+result+"]") ||
		!strings.Contains(got[0], "("+unit+")") || !strings.Contains(got[0], "Result="+result) {
		e.T.Errorf("the group's crash entries are\n%s\nwant one naming %s, Result=%s", strings.Join(got, "\n"), unit, result)
	}
}
