package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// The operator's surface against the real daemon: the control socket's
// permissions, pause and pin across restarts, a --for that runs out,
// dry-run touching no unit, and status --json against systemd's view.
func TestControl(t *testing.T) {
	parallel(t)
	e := setup(t)
	// What the package's sysusers.d creates, and two operators.
	e.Sh(`getent group flexiq-scaled >/dev/null || groupadd --system flexiq-scaled
getent group flexiq-scaled-admin >/dev/null || groupadd --system flexiq-scaled-admin
id ctlreader >/dev/null 2>&1 || useradd --no-create-home -G flexiq-scaled ctlreader
id ctladmin >/dev/null 2>&1 || useradd --no-create-home -G flexiq-scaled-admin ctladmin
rm -f /var/lib/flexiq-scaled/override-*.json`)
	t.Cleanup(func() { e.SB.Exec(e.Ctx(), "sh", "-c", "rm -f /var/lib/flexiq-scaled/override-*.json") })
	e.Configure(e.poolConfig("ctl", "min_workers = 1\nmax_workers = 4\nscale_down_window_sec = 0\n") +
		e.poolConfig("dry", "mode = \"dry-run\"\nmin_workers = 2\nmax_workers = 4\n"))
	e.StartDaemon()
	e.waitWorkers("ctl", 1, 20*time.Second)

	as := func(user string, args ...string) (string, error) {
		argv := append([]string{"flexiq-scaled"}, args...)
		if user != "root" {
			argv = append([]string{"runuser", "-u", user, "--"}, argv...)
		}
		return e.SB.Exec(e.Ctx(), argv...)
	}
	status := func() api.StatusResponse {
		t.Helper()
		out, err := as("root", "status", "--json")
		if err != nil {
			e.Fatalf("status --json: %v", err)
		}
		var s api.StatusResponse
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			e.Fatalf("status --json: %v\n%s", err, out)
		}
		return s
	}
	pool := func(s api.StatusResponse, name string) int {
		for i, v := range s.Pools {
			if v.Pool == name {
				return i
			}
		}
		e.Fatalf("no pool %s in status", name)
		return -1
	}

	// Permissions: nobody may do nothing; a reader may read and not
	// change; an admin may change.
	for _, c := range []struct {
		user   string
		args   []string
		denied bool
		group  string
	}{
		{"nobody", []string{"status"}, true, "flexiq-scaled"},
		{"nobody", []string{"explain", "ctl"}, true, "flexiq-scaled"},
		{"ctlreader", []string{"status", "ctl"}, false, ""},
		{"ctlreader", []string{"explain", "ctl", "--last", "2"}, false, ""},
		{"ctlreader", []string{"pause", "ctl"}, true, "flexiq-scaled-admin"},
		{"ctlreader", []string{"pin", "ctl", "2"}, true, "flexiq-scaled-admin"},
		{"ctladmin", []string{"pause", "ctl", "--for", "1h"}, false, ""},
		{"ctladmin", []string{"resume", "ctl"}, false, ""},
		{"ctlreader", []string{"roll", "ctl"}, true, "flexiq-scaled-admin"},
		{"ctladmin", []string{"roll", "ctl", "--reason", "deploy by ctladmin"}, false, ""},
		// reload goes over the same socket, with the same rights.
		{"ctlreader", []string{"reload"}, true, "flexiq-scaled-admin"},
		{"ctladmin", []string{"reload"}, false, ""},
	} {
		out, err := as(c.user, c.args...)
		switch {
		case c.denied && (err == nil || !strings.Contains(out, "permission denied") || !strings.Contains(out, "group "+c.group)):
			e.Errorf("%s %q: want permission denied naming %s, got %v\n%s", c.user, c.args, c.group, err, out)
		case !c.denied && err != nil:
			e.Errorf("%s %q: %v", c.user, c.args, err)
		}
	}
	// The admin's roll went over the socket: the rollout ran to its end.
	e.Eventually(30*time.Second, "the admin's rollout done", func() (bool, string) {
		out := e.Sh("journalctl -o cat --no-pager MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b0b FLEXIQ_POOL=ctl || true")
		return strings.Contains(out, "ctl"), out
	})
	if out, _ := as("root", "status"); !strings.Contains(out, "● ctl - active") || !strings.Contains(out, "● dry - dry-run") {
		e.Errorf("status:\n%s", out)
	} else {
		t.Logf("flexiq-scaled status:\n%s", out)
	}

	// A pin holds N while the queue asks for 1, across a restart.
	as("root", "pin", "ctl", "3")
	e.waitWorkers("ctl", 3, 20*time.Second)
	e.Sh("systemctl restart " + daemonUnit)
	if s := status(); s.Pools[pool(s, "ctl")].Mode != "pinned" {
		e.Fatalf("after the restart: mode %q, want pinned", s.Pools[pool(s, "ctl")].Mode)
	}
	time.Sleep(3 * time.Second) // three ticks with an empty queue
	e.waitWorkers("ctl", 3, time.Second)
	if out, _ := as("root", "explain", "ctl", "--last", "1"); !strings.Contains(out, "held by: override") {
		e.Errorf("explain of a pinned pool with an empty queue:\n%s", out)
	}
	as("root", "unpin", "ctl")
	e.waitWorkers("ctl", 1, 20*time.Second)

	// A paused pool holds while the queue asks for 4, across a restart, and
	// resumes by itself when its --for runs out.
	as("root", "pause", "ctl", "--for", "12s")
	e.Enqueue(60, 10*time.Second) // depth 4
	e.Sh("systemctl restart " + daemonUnit)
	s := status()
	if v := s.Pools[pool(s, "ctl")]; v.Mode != "paused" || v.Override == nil || v.Override.Until.IsZero() {
		e.Fatalf("after the restart: %+v, want paused with a deadline", v)
	}
	time.Sleep(2 * time.Second)
	e.waitWorkers("ctl", 1, time.Second)
	e.waitWorkers("ctl", 4, 30*time.Second)
	if es := e.Entries("MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b32", "FLEXIQ_POOL=ctl"); len(es) == 0 ||
		!strings.Contains(es[len(es)-1].Field("MESSAGE"), "deadline") {
		e.Errorf("no journal entry for the pause's expiry: %v", es)
	}
	for _, id := range []string{"4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b30", "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b31"} {
		if len(e.Entries("MESSAGE_ID="+id, "FLEXIQ_POOL=ctl")) == 0 {
			e.Errorf("no journal entry with MESSAGE_ID=%s", id)
		}
	}

	// status --json says what systemd says.
	e.Eventually(10*time.Second, "status --json matching systemd", func() (bool, string) {
		s := status()
		v := s.Pools[pool(s, "ctl")]
		active := e.Workers("ctl", "active")
		units := map[string]bool{}
		for _, w := range v.WorkerList {
			if w.State == "active" {
				units[w.Unit] = true
			}
		}
		ok := v.Workers.Live == len(active) && len(units) == len(active) && v.Queue != nil && v.Source.Healthy
		for _, u := range active {
			ok = ok && units[u]
		}
		return ok, fmt.Sprintf("status: live %d %v; systemd: %v", v.Workers.Live, units, active)
	})

	// The dry-run pool decided, logged, and touched no unit: none exists,
	// no start or stop was ever logged for it.
	if ws := e.Workers("dry"); len(ws) != 0 {
		e.Errorf("dry-run pool has units: %v", ws)
	}
	if es := e.Entries("MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b33", "FLEXIQ_POOL=dry"); len(es) == 0 ||
		!strings.Contains(es[0].Field("MESSAGE"), "would scale 0 → 2") {
		e.Errorf("no 'would scale 0 → 2' for the dry-run pool: %v", es)
	}
	for _, id := range []string{"4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b02", "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b09"} {
		if es := e.Entries("MESSAGE_ID="+id, "FLEXIQ_POOL=dry"); len(es) != 0 {
			e.Errorf("the dry-run pool started or drained a worker: %v", es)
		}
	}
	if out := e.JournalText("-u", "init.scope", "--grep", "flexiq-dry@"); strings.Contains(out, "flexiq-dry@") {
		e.Errorf("systemd ran a job for a dry-run unit:\n%s", out)
	}
	if s := status(); s.Pools[pool(s, "dry")].Workers.Target != 4 {
		e.Errorf("dry-run pool's target: %+v, want 4 (what it would do with 60 jobs pending)", s.Pools[pool(s, "dry")].Workers)
	}
}
