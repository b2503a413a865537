package services

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
)

// What the wake address's tests (wake_test.go) measure with: a request
// timed inside the client, systemd's and the journal's times of each step,
// and the wake process's own counts.

// timedGet makes one request through nginx inside the sandbox: its status
// and its start and end (wall clock, ns).
func (e *env) timedGet(path string) (code int, start, end time.Time) {
	e.T.Helper()
	// Timed inside the client, around the request: a curl started from a
	// shell between two dates adds its own start, some 25 ms here.
	out := e.Sh(`/usr/local/bin/flexiq-loadgen -once -timeout 100s -url http://127.0.0.1:8080` + path)
	f := strings.Fields(out)
	if len(f) != 3 {
		e.T.Fatalf("timed request: %q", out)
	}
	code, _ = strconv.Atoi(f[0])
	ns := func(s string) time.Time { n, _ := strconv.ParseInt(s, 10, 64); return time.Unix(0, n) }
	return code, ns(f[1]), ns(f[2])
}

// mainStart is when the unit's process started (ExecMainStartTimestamp).
func (e *env) mainStart(unit string) time.Time { return e.unitTime(unit, "ExecMainStartTimestamp") }

// unitTime is one of the unit's timestamps (a property such as
// InactiveExitTimestamp, when systemd began to start it).
func (e *env) unitTime(unit, prop string) time.Time {
	e.T.Helper()
	v := strings.TrimSpace(e.Sh("systemctl show -P " + prop + " --timestamp=us+utc " + unit))
	ts, err := time.Parse("Mon 2006-01-02 15:04:05.999999 MST", v)
	if err != nil {
		e.T.Fatalf("%s of %s: %v", prop, unit, err)
	}
	return ts
}

// ownStartToReady is a replica's own time from its start to ready: from
// systemd beginning to start its unit (InactiveExitTimestamp) to its own
// word that it is ready (flexiq-testservice logs "ready" as its /health
// turns 200), the first such word at or after since. A request that
// waited for it cannot be answered sooner; what the wake path adds is the
// rest.
func (e *env) ownStartToReady(unit string, since time.Time) (started, ready time.Time) {
	e.T.Helper()
	return e.unitTime(unit, "InactiveExitTimestamp"), e.journalTime(since, "_SYSTEMD_UNIT="+unit, "-g", " ready$")
}

// journalTime is the time of the first journal entry at or after after
// that journalctl's arguments match.
func (e *env) journalTime(after time.Time, match ...string) time.Time {
	e.T.Helper()
	var ts time.Time
	e.Eventually(10*time.Second, "a journal entry "+strings.Join(match, " "), func() (bool, string) {
		out, _ := e.Try(append([]string{"journalctl", "-o", "short-unix", "-q", "--since", fmt.Sprintf("@%d", after.Unix())}, match...)...)
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			secs, frac, _ := strings.Cut(f[0], ".")
			sec, err1 := strconv.ParseInt(secs, 10, 64)
			us, err2 := strconv.ParseInt((frac + "000000")[:6], 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			if t := time.Unix(sec, us*1000); !t.Before(after) {
				ts = t
				return true, ""
			}
		}
		return false, out
	})
	return ts
}

// stage is one step of a cold request, from the journal's and systemd's
// times.
type stage struct {
	name string
	took time.Duration
}

// wakeStages splits a cold request (start to end) that replica unit
// served into its steps, which add up to the whole: the request reaching
// the daemon as a wake request, the decision, systemd starting the
// replica, the replica's own start to ready, its admission (the probe),
// and the answer (the held connection forwarded, the replica's answer
// back through nginx).
func (e *env) wakeStages(start, end time.Time, unit string) []stage {
	e.T.Helper()
	requested := e.journalTime(start, "MESSAGE_ID="+string(eventlog.WakeRequested))
	decided := e.journalTime(start, "MESSAGE_ID="+string(eventlog.Decision))
	admitted := e.journalTime(start, "MESSAGE_ID="+string(eventlog.ReplicaReadiness))
	unitStart, itsReady := e.ownStartToReady(unit, start)
	return []stage{
		{"request_to_wake_request", requested.Sub(start)},
		{"wake_request_to_decision", decided.Sub(requested)},
		{"decision_to_replica_start", unitStart.Sub(decided)},
		{"replica_own_start_to_ready", itsReady.Sub(unitStart)},
		{"its_ready_to_admitted", admitted.Sub(itsReady)},
		{"admitted_to_answer", end.Sub(admitted)},
	}
}

// wakeStats is the wake process's last report of pool web's wake address,
// as status --json shows it.
func (e *env) wakeStats() api.WakeStats {
	e.T.Helper()
	var st api.StatusResponse
	out := e.CLI("status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Pools) != 1 || st.Pools[0].Wake == nil {
		e.Fatalf("status --json: no wake address for web (%v):\n%s", err, out)
	}
	return st.Pools[0].Wake.WakeStats
}
