package e2e

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// run runs argv in the sandbox and returns its stdout, its stderr and its
// exit status, for commands whose failure is the point.
func (e *env) run(argv ...string) (stdout, stderr string, code int) {
	e.T.Helper()
	cmd := e.SB.Command(e.Ctx(), argv...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errb.String(), ee.ExitCode()
	}
	if err != nil {
		e.T.Fatalf("%v: %v", argv, err)
	}
	return out.String(), errb.String(), 0
}

const reloadedID = "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b06"

// lastReload is the MESSAGE of the daemon's latest "configuration
// reloaded" (or rejected) entry.
func (e *env) lastReload() string {
	e.T.Helper()
	entries := e.Entries("-u", daemonUnit, reloadedID)
	if len(entries) == 0 {
		return ""
	}
	return entries[len(entries)-1].Field("MESSAGE")
}

// `systemctl reload` reports the daemon's verdict: it fails on a rejected
// file, with the problems named by file and key where the reload's own
// output goes (and on stderr of `flexiq-scaled reload` run by hand), and
// succeeds on a good one; the journal says what changed, or that nothing
// did. The request and the verdict travel over the control socket. A plain
// SIGHUP still reloads, and a unit file from before (ExecReload= with
// --pid $MAINPID) still works.
func TestReloadVerdict(t *testing.T) {
	parallel(t)
	e := setup(t)
	good := e.poolConfig("verdict", "min_workers = 1\n")
	e.Configure(good)
	e.StartDaemon()
	e.waitWorkers("verdict", 1, 10*time.Second)

	// Unchanged file.
	if out, errs, code := e.run("systemctl", "reload", daemonUnit); code != 0 {
		t.Fatalf("reload of an unchanged file: exit %d\n%s%s", code, out, errs)
	}
	if msg := e.lastReload(); !strings.Contains(msg, "nothing changed") {
		t.Errorf("unchanged reload logged %q, want it to say nothing changed", msg)
	}
	out, errs, code := e.run("flexiq-scaled", "reload")
	if code != 0 || strings.TrimSpace(out) != "nothing changed" {
		t.Errorf("flexiq-scaled reload of an unchanged file: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	// A changed bound and interval.
	e.Configure(e.poolConfig("verdict", "min_workers = 1\nmax_workers = 3\npoll_interval_sec = 2\n"))
	t0 := time.Now()
	if out, errs, code := e.run("systemctl", "reload", daemonUnit); code != 0 {
		t.Fatalf("good reload: exit %d\n%s%s", code, out, errs)
	}
	t.Logf("systemctl reload of a good file took %s", time.Since(t0).Round(time.Millisecond))
	if msg := e.lastReload(); !strings.Contains(msg, "pool verdict: max_workers, poll_interval_sec") {
		t.Errorf("reload logged %q, want the changed keys of pool verdict", msg)
	}

	// An invalid file: refused, the daemon keeps running on the old one.
	e.Configure(good + "\n[pools.verdict.limits]\nmax_worker = 3\n")
	out, errs, code = e.run("systemctl", "reload", daemonUnit)
	if code == 0 {
		t.Fatalf("systemctl reload of an invalid file succeeded:\n%s%s", out, errs)
	}
	t.Logf("systemctl reload of an invalid file: exit %d, stderr:\n%s", code, errs)
	if st := e.UnitProp(daemonUnit, "ActiveState"); st != "active" {
		t.Fatalf("after a rejected reload the daemon is %s", st)
	}
	// What the reload command printed is the unit's journal, under its
	// own process, next to the daemon's rejection.
	if j := e.JournalText("-u", daemonUnit, "_COMM=flexiq-scaled"); !strings.Contains(j, "/etc/flexiq-scaled/config.toml: pools.verdict.limits.max_worker") {
		t.Errorf("the journal does not name the bad key:\n%s", j)
	}
	// systemctl itself only says "Job for flexiq-scaled.service failed"
	// and points to systemctl status, which shows them.
	if st, _, _ := e.run("systemctl", "status", "--no-pager", "-n", "30", daemonUnit); !strings.Contains(st, "pools.verdict.limits.max_worker") {
		t.Errorf("systemctl status does not show the rejected key:\n%s", st)
	}
	t1 := time.Now()
	out, errs, code = e.run("flexiq-scaled", "reload")
	t.Logf("flexiq-scaled reload of an invalid file took %s", time.Since(t1).Round(time.Millisecond))
	if code != 1 || !strings.Contains(errs, "/etc/flexiq-scaled/config.toml: pools.verdict.limits.max_worker") {
		t.Errorf("flexiq-scaled reload of an invalid file: exit %d, stdout %q, stderr %q; want 1 and the file and key on stderr", code, out, errs)
	}
	e.waitWorkers("verdict", 1, 5*time.Second)

	// A plain SIGHUP still reloads (and answers no one).
	e.Configure(e.poolConfig("verdict", "min_workers = 2\n"))
	e.Sh("systemctl kill -s HUP " + daemonUnit)
	e.waitWorkers("verdict", 2, 10*time.Second)

	// The unit file of an older package, kept by a drop-in: --pid is
	// accepted, and the verdict still decides the exit status.
	e.Write("/etc/systemd/system/"+daemonUnit+".d/50-old-reload.conf",
		"[Service]\nExecReload=\nExecReload=/usr/bin/flexiq-scaled reload --pid $MAINPID\n")
	e.Sh("systemctl daemon-reload")
	t.Cleanup(func() {
		e.SB.Exec(e.Ctx(), "sh", "-c", "rm -f /etc/systemd/system/"+daemonUnit+".d/50-old-reload.conf && systemctl daemon-reload")
	})
	e.Configure(e.poolConfig("verdict", "min_workers = 1\n"))
	if out, errs, code := e.run("systemctl", "reload", daemonUnit); code != 0 {
		t.Errorf("reload through an old unit file: exit %d\n%s%s", code, out, errs)
	}
	if msg := e.lastReload(); !strings.Contains(msg, "pool verdict: min_workers") {
		t.Errorf("reload through an old unit file logged %q", msg)
	}
	e.Configure(good + "\n[pools.verdict.limits]\nmax_worker = 3\n")
	if _, _, code := e.run("systemctl", "reload", daemonUnit); code == 0 {
		t.Errorf("reload of an invalid file through an old unit file succeeded")
	}
	if left := e.Sh("ls /run/flexiq-scaled | grep -E '^(request|verdict)[.]|^daemon.pid$' || true"); left != "" {
		t.Errorf("files of the old file-and-signal protocol in the runtime directory:\n%s", left)
	}
}

// `flexiq-scaled roll` reaches the daemon; an unknown pool is an error.
func TestRollCommand(t *testing.T) {
	parallel(t)
	e := setup(t)
	e.Configure(e.poolConfig("rollme", "min_workers = 1\n"))
	e.StartDaemon()
	e.waitWorkers("rollme", 1, 10*time.Second)

	out, errs, code := e.run("flexiq-scaled", "roll", "nosuchpool")
	if code != 1 || !strings.Contains(errs, "no such pool: nosuchpool") {
		t.Errorf("roll of an unknown pool: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	out, errs, code = e.run("flexiq-scaled", "roll", "--reason", "deploy 42", "rollme")
	if code != 0 || !strings.Contains(out, "pool rollme: rollout requested") {
		t.Errorf("roll: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// Without a daemon the command fails at once rather than wait.
	e.Sh("systemctl stop " + daemonUnit)
	if _, errs, code := e.run("flexiq-scaled", "roll", "rollme"); code != 1 || !strings.Contains(errs, "flexiq-scaled is not running") {
		t.Errorf("roll without a daemon: exit %d, stderr %q", code, errs)
	}
}

// `systemctl stop` leaves no worker of any pool running, not even one whose
// start job was still pending, or that started while the pools drained.
func TestStopLeavesNothingRunning(t *testing.T) {
	parallel(t)
	e := setup(t)
	// Every worker of pool sweep spends 4 s activating.
	e.Write("/etc/systemd/system/flexiq-sweep@.service.d/50-slow.conf", "[Service]\nExecStartPre=/bin/sleep 4\n")
	e.Sh("systemctl daemon-reload")
	e.Configure(e.poolConfig("stubborn", `
exec = ["/usr/local/bin/flexiq-testworker", "--ignore-sigterm"]
min_workers = 1
drain_timeout_sec = 3
`) + e.poolConfig("sweep", "min_workers = 0\n"))
	e.StartDaemon()
	e.waitWorkers("stubborn", 1, 10*time.Second)

	// The stop takes 3 s, the stubborn worker's drain timeout. Meanwhile
	// workers appear that no pool knows: one whose start job is still
	// running (in its 4 s ExecStartPre) when the pools are done, and one
	// of a pool that is not configured at all.
	e.Sh("systemctl stop --no-block " + daemonUnit)
	e.Eventually(5*time.Second, "daemon deactivating", func() (bool, string) {
		st := e.UnitProp(daemonUnit, "ActiveState")
		return st == "deactivating", st
	})
	e.Sh(`systemd-run --no-block --unit flexiq-sweep@7.service /usr/bin/sleep 1000
systemd-run --unit flexiq-elsewhere@3.service /usr/bin/sleep 1000`)
	e.Eventually(60*time.Second, "daemon stopped", func() (bool, string) {
		st := e.UnitProp(daemonUnit, "ActiveState")
		return st == "inactive" || st == "failed", st
	})
	if left := e.Workers("*", "active", "activating", "deactivating", "reloading"); len(left) > 0 {
		e.Errorf("workers still running after the stop: %v", left)
	}
	if j := e.JournalText("-u", daemonUnit); !strings.Contains(j, "flexiq-sweep@7.service was still activating") ||
		!strings.Contains(j, "flexiq-elsewhere@3.service was still active") {
		e.Errorf("the daemon did not report the workers it swept")
	}
}

// Failed units of pools that are no longer configured are reset, at start
// and at a reload, so that the host does not stay "degraded".
func TestFailedUnitsOfUnconfiguredPoolsAreReset(t *testing.T) {
	parallel(t)
	e := setup(t)
	failed := func() []string {
		out := e.Sh("systemctl list-units --failed --plain --no-legend 'flexiq-*' | awk '{print $1}'")
		return strings.Fields(out)
	}
	e.Sh("systemd-run --unit flexiq-gone@1.service /bin/false || true")
	e.Eventually(10*time.Second, "flexiq-gone@1 failed", func() (bool, string) {
		f := failed()
		return slices.Contains(f, "flexiq-gone@1.service"), strings.Join(f, " ")
	})
	state := strings.TrimSpace(func() string { out, _, _ := e.run("systemctl", "is-system-running"); return out }())
	t.Logf("with a failed worker unit the sandbox is %q", state)

	e.Configure(e.poolConfig("kept", "min_workers = 1\n"))
	e.StartDaemon()
	e.waitWorkers("kept", 1, 10*time.Second)
	if f := failed(); len(f) > 0 {
		e.Errorf("failed units left after the daemon started: %v", f)
	}
	if f := strings.TrimSpace(e.Sh("systemctl list-units --failed --plain --no-legend | wc -l")); f == "0" {
		if out, _, _ := e.run("systemctl", "is-system-running"); strings.TrimSpace(out) == "degraded" {
			t.Errorf("no unit failed, yet the sandbox is degraded")
		}
	}

	// At a reload.
	e.Sh("systemd-run --unit flexiq-gone@2.service /bin/false || true")
	e.Eventually(10*time.Second, "flexiq-gone@2 failed", func() (bool, string) {
		f := failed()
		return slices.Contains(f, "flexiq-gone@2.service"), strings.Join(f, " ")
	})
	e.Sh("systemctl reload " + daemonUnit)
	e.Eventually(10*time.Second, "no failed flexiq units", func() (bool, string) {
		f := failed()
		return len(f) == 0, strings.Join(f, " ")
	})
}

// A pool removed and added back while its workers still drain: the old
// drain never stops a worker of the new instance, and the new instance
// reaches its size.
func TestPoolReAddedWhileDraining(t *testing.T) {
	parallel(t)
	e := setup(t)
	pool := e.poolConfig("readd", `
exec = ["/usr/local/bin/flexiq-testworker", "--ignore-sigterm"]
min_workers = 1
drain_timeout_sec = 4
`)
	e.Configure(pool)
	e.StartDaemon()
	e.waitWorkers("readd", 1, 10*time.Second)

	e.Configure(e.poolConfig("other", "min_workers = 0\n"))
	e.Sh("systemctl reload " + daemonUnit)
	e.Eventually(5*time.Second, "readd@1 deactivating", func() (bool, string) {
		ws := e.Workers("readd", "deactivating")
		return len(ws) == 1, strings.Join(ws, " ")
	})
	e.Configure(pool)
	e.Sh("systemctl reload " + daemonUnit)
	// The old worker ends at its drain timeout; the new instance has one
	// active worker by then at the latest, and keeps it.
	e.waitWorkers("readd", 1, 20*time.Second)
	time.Sleep(6 * time.Second) // beyond the old drain's timeout
	if ws := e.Workers("readd", "active"); len(ws) != 1 {
		e.Errorf("after the old instance's drain, pool readd has %v active, want 1", ws)
	}
	// The journal entry of a logger.With("pool", ...) is the one that was
	// written by hand: MESSAGE_ID, one FLEXIQ_POOL, the same MESSAGE.
	var readded []sandbox.JournalEntry
	for _, en := range e.Entries("-u", daemonUnit, "MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b07", "FLEXIQ_POOL=readd") {
		if strings.Contains(en.Field("MESSAGE"), "added back") {
			readded = append(readded, en)
		}
	}
	if len(readded) != 1 || readded[0].Field("MESSAGE") != "pool=readd added back while draining: its draining workers finish on their own" ||
		readded[0].Field("FLEXIQ_POOL") != "readd" || readded[0].Field("PRIORITY") != "6" {
		e.Errorf("the re-added pool's journal entry: %v", readded)
	}
}
