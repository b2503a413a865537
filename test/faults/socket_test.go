package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

var (
	floodOnce sync.Once
	floodErr  error
)

// floodBinary builds the hostile local user (./test/faults/flood) once and
// installs it in the sandbox, where nobody may run it.
func (e *env) floodBinary() string {
	e.T.Helper()
	floodOnce.Do(func() {
		root, _ := sandbox.ModuleRoot()
		cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, "flexiq-flood"), "./test/faults/flood")
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			floodErr = fmt.Errorf("building the flood: %v\n%s", err, out)
		}
	})
	if floodErr != nil {
		e.T.Fatal(floodErr)
	}
	e.Sh("install -m 0755 " + binDir + "/flexiq-flood /usr/local/bin/flexiq-flood")
	return "/usr/local/bin/flexiq-flood"
}

// floodReport is what flexiq-flood prints.
type floodReport struct {
	Dials      int            `json:"dials"`
	DialErrors map[string]int `json:"dial_errors"`
	Answers    map[int]int    `json:"answers"`
	Closed     int            `json:"closed_by_server"`
	MaxOpen    int            `json:"max_open"`
}

// daemonFootprint is the daemon's open descriptors and resident memory.
func (e *env) daemonFootprint() (fds int, rssKB int, err error) {
	out, err := e.Try("sh", "-c", `pid=$(systemctl show -P MainPID flexiq-scaled.service)
ls /proc/$pid/fd | wc -l
awk '/^VmRSS:/ { print $2 }' /proc/$pid/status`)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("footprint: %q", out)
	}
	fds, _ = strconv.Atoi(f[0])
	rssKB, _ = strconv.Atoi(f[1])
	return fds, rssKB, nil
}

// TestSocketFlood: issue 17's attacks on the daemon's sockets, as local
// users. Before: 1,013 connections from nobody to the 0666 control socket,
// each read up to 1 MiB of headers before being refused, starved root's
// status and exhausted the daemon's descriptors; trickled headers took its
// heap from 17 to 401 MiB; metrics.sock was 0666 and never closed an idle
// connection; a user who handed the socket to a child and exited was judged
// by /etc/group. Now: while nobody floods both sockets (1,100 connections
// reconnecting as fast as they are closed) and a member of the read group
// trickles headers on 400 connections to each, root's status answers
// within seconds on root.sock (mode 0600: a queue that no other user's
// connection reaches) and within its timeout on control.sock, behind the
// floods' connections; the daemon's descriptors stay within its caps and its memory
// within a few MB; metrics.sock is 0660, group flexiq-scaled, and refuses
// nobody while the proxy still scrapes it; and the hand-off is judged by the
// credentials the kernel recorded at connect.
func TestSocketFlood(t *testing.T) {
	e := setup(t, "socket-flood")
	flood := e.floodBinary()
	root, _ := sandbox.ModuleRoot()
	// The package's groups (sysusers.d); a reader; and a user whom
	// /etc/group lists in the admin group but whose process will have
	// dropped it.
	e.Sh(`getent group flexiq-scaled >/dev/null || groupadd --system flexiq-scaled
getent group flexiq-scaled-admin >/dev/null || groupadd --system flexiq-scaled-admin
id fltreader >/dev/null 2>&1 || useradd --no-create-home -G flexiq-scaled fltreader
id fltgone >/dev/null 2>&1 || useradd --no-create-home -G flexiq-scaled-admin fltgone`)
	for _, u := range []string{"flexiq-scaled-metrics.socket", "flexiq-scaled-metrics.service"} {
		b, err := os.ReadFile(filepath.Join(root, "systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		e.Write("/etc/systemd/system/"+u, string(b))
	}
	e.Sh("systemctl daemon-reload && systemctl start flexiq-scaled-metrics.socket")
	e.Configure(e.demandPool("flood", "min_workers = 1\nmax_workers = 3\n"))
	e.StartDaemon()
	e.waitLive("flood", 1, 30*time.Second)

	// root.sock: root's alone, by the file's mode; the read group's
	// status falls back to control.sock.
	if st := strings.TrimSpace(e.Sh("stat -c '%a %U %G' /run/flexiq-scaled/root.sock")); st != "600 root root" {
		e.Errorf("root.sock is %q, want 600 root root", st)
	}
	if out, err := e.Try("runuser", "-u", "fltreader", "--", "flexiq-scaled", "status", "--socket", "/run/flexiq-scaled/root.sock", "flood"); err == nil || !strings.Contains(out, "permission denied: cannot connect") {
		e.Errorf("fltreader on root.sock: %v %.300s, want the connect refused for permission", err, out)
	}
	if out, err := e.Try("runuser", "-u", "fltreader", "--", "flexiq-scaled", "status", "flood"); err != nil || !strings.Contains(out, "flood") {
		e.Errorf("fltreader's status (root.sock refused, then control.sock): %v\n%s", err, out)
	}

	// metrics.sock: the read group's, not nobody's; the proxy, a dynamic
	// user with the group, still serves it on 127.0.0.1:9958.
	if st := strings.TrimSpace(e.Sh("stat -c '%a %U %G' /run/flexiq-scaled/metrics.sock")); st != "660 root flexiq-scaled" {
		e.Errorf("metrics.sock is %q, want 660 root flexiq-scaled", st)
	}
	if out, err := e.Try("runuser", "-u", "nobody", "--", "curl", "-sS", "--max-time", "5", "--unix-socket", "/run/flexiq-scaled/metrics.sock", "http://x/metrics"); err == nil {
		e.Errorf("nobody read metrics.sock:\n%.300s", out)
	} else if !strings.Contains(out, "ermission denied") && !strings.Contains(out, "Couldn't connect") {
		e.Errorf("nobody's read of metrics.sock failed, but not for want of permission: %v\n%s", err, out)
	}
	if out, err := e.Try("curl", "-sf", "--max-time", "10", "http://127.0.0.1:9958/metrics"); err != nil || !strings.Contains(out, "flexiq_scaled_") {
		e.Errorf("the proxy cannot scrape metrics.sock: %v\n%.300s\n%s", err, out, e.JournalText("-u", "flexiq-scaled-metrics.service", "-n", "20"))
	}

	fds0, rss0, err := e.daemonFootprint()
	if err != nil {
		t.Fatal(err)
	}
	// The floods, as transient services of the sandbox's systemd, so that
	// they run as their users and end with it.
	const secs = 25
	floods := []struct{ unit, user, socket, mode, n string }{
		{"flood-nobody-control", "nobody", "/run/flexiq-scaled/control.sock", "reconnect", "1100"},
		{"flood-nobody-metrics", "nobody", "/run/flexiq-scaled/metrics.sock", "reconnect", "1100"},
		{"flood-reader-control", "fltreader", "/run/flexiq-scaled/control.sock", "trickle", "400"},
		{"flood-reader-metrics", "fltreader", "/run/flexiq-scaled/metrics.sock", "trickle", "400"},
	}
	for _, f := range floods {
		e.Sh(fmt.Sprintf("systemd-run --quiet --unit=%s -p User=%s -p LimitNOFILE=8192 %s -socket %s -mode %s -n %s -for %ds",
			f.unit, f.user, flood, f.socket, f.mode, f.n, secs))
	}
	t0 := time.Now()
	var (
		// root's status by default (root.sock), and on control.sock,
		// the socket the floods share
		asked, answered, askedShared, answeredShared int
		slowest, slowestShared                       time.Duration
		maxFDs, maxRSS                               = fds0, rss0
		failures                                     []string
	)
	status := func(argv ...string) (time.Duration, bool) {
		s0 := time.Now()
		out, err := e.Try(append([]string{"flexiq-scaled", "status"}, argv...)...)
		d := time.Since(s0)
		if err == nil && strings.Contains(out, "flood") {
			return d, true
		}
		if len(failures) < 5 {
			failures = append(failures, fmt.Sprintf("%v: %v %s", time.Since(t0).Round(time.Second), err, out))
		}
		return d, false
	}
	time.Sleep(2 * time.Second) // the floods connected
	for time.Since(t0) < (secs-2)*time.Second {
		asked++
		if d, ok := status("flood"); ok {
			answered++
			slowest = max(slowest, d)
		}
		askedShared++
		if d, ok := status("--socket", "/run/flexiq-scaled/control.sock", "flood"); ok {
			answeredShared++
			slowestShared = max(slowestShared, d)
		}
		if fds, rss, err := e.daemonFootprint(); err == nil {
			maxFDs, maxRSS = max(maxFDs, fds), max(maxRSS, rss)
		}
		time.Sleep(500 * time.Millisecond)
	}
	reports := map[string]floodReport{}
	e.Eventually(30*time.Second, "the floods' reports", func() (bool, string) {
		for _, f := range floods {
			if _, ok := reports[f.unit]; ok {
				continue
			}
			out, _ := e.Try("journalctl", "-o", "cat", "--no-pager", "-u", f.unit+".service")
			for _, line := range strings.Split(out, "\n") {
				var r floodReport
				if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &r) == nil {
					reports[f.unit] = r
				}
			}
		}
		return len(reports) == len(floods), fmt.Sprint(reports)
	})
	for _, f := range floods {
		t.Logf("%s: %+v", f.unit, reports[f.unit])
	}
	e.figure("asked", asked, "answered", answered, "slowest_status", slowest,
		"asked_control_sock", askedShared, "answered_control_sock", answeredShared, "slowest_status_control_sock", slowestShared,
		"fds_before", fds0, "fds_max", maxFDs, "rss_before_MB", fmt.Sprintf("%.1f", float64(rss0)/1024), "rss_max_MB", fmt.Sprintf("%.1f", float64(maxRSS)/1024),
		"nobody_dials", reports["flood-nobody-control"].Dials, "reader_max_open", reports["flood-reader-control"].MaxOpen)

	// root.sock: no flood reaches its queue, so root waits only for the
	// CPUs, which the 3,000 flooding connections share with the daemon on
	// this two-CPU box. Within 5 s, half the command's own timeout.
	// control.sock: root's connection waits in the queue behind the
	// floods' (the daemon refuses some 500 to 3,000 a second, depending
	// on the machine), and must still be answered, within the command's
	// timeout (10 s).
	if answered != asked || slowest > 5*time.Second {
		e.Errorf("root's status under the flood: %d of %d answered, slowest %s (want all, within 5 s): %q", answered, asked, slowest, failures)
	}
	if answeredShared != askedShared {
		e.Errorf("root's status on control.sock under the flood: %d of %d answered, slowest %s (want all): %q", answeredShared, askedShared, slowestShared, failures)
	}
	// The caps: the reader holds at most 16 connections per socket; nobody
	// holds none. Some 40 descriptors are the daemon's own.
	if limit := fds0 + 2*16 + 16; maxFDs > limit {
		e.Errorf("the daemon's descriptors: %d under the flood (%d before), want at most %d", maxFDs, fds0, limit)
	}
	if maxRSS > rss0+32<<10 {
		e.Errorf("the daemon's RSS: %.1f MB under the flood (%.1f before), want at most 32 MB more", float64(maxRSS)/1024, float64(rss0)/1024)
	}
	if r := reports["flood-nobody-control"]; r.Answers[200] != 0 || r.Answers[403] == 0 {
		e.Errorf("nobody on the control socket: %+v, want 403s and no 200", r)
	}
	if r := reports["flood-nobody-metrics"]; len(r.Answers) != 0 || r.DialErrors["permission denied"] == 0 {
		e.Errorf("nobody on metrics.sock: %+v, want every connect refused by the file's mode", r)
	}
	for _, u := range []string{"flood-reader-control", "flood-reader-metrics"} {
		if r := reports[u]; r.Answers[503] == 0 || r.Answers[200] != 0 {
			e.Errorf("%s: %+v, want 503 past the cap, and no request served from a header never finished", u, r)
		}
	}
	// The refusals cost a few journal lines, not one per connection.
	if n := strings.Count(e.JournalText("-u", daemonUnit, "--grep", "refused a connection"), "\n"); n > 4*(secs/10+2) {
		e.Errorf("%d journal lines for refused connections in %d s", n, secs)
	}
	if out, err := e.Try("curl", "-sf", "--max-time", "10", "http://127.0.0.1:9958/metrics"); err != nil || !strings.Contains(out, "flexiq_scaled_") {
		e.Errorf("the proxy cannot scrape after the flood: %v", err)
	}

	// The hand-off: fltgone connects without its admin group (dropped, as
	// by newgrp or setpriv), hands the socket to a child and exits; the
	// child asks for a pin. /etc/group lists fltgone as an admin, which
	// the old code consulted once the caller was gone.
	pin := []string{"-socket", "/run/flexiq-scaled/control.sock", "-mode", "handoff", "-request", "POST /v1/pools/flood/pin", "-body", `{"workers": 2}`}
	out, _ := e.Try(append([]string{"setpriv", "--reuid=fltgone", "--regid=fltgone", "--clear-groups", flood}, pin...)...)
	if !strings.HasPrefix(strings.TrimSpace(out), "403 ") || !strings.Contains(out, "permission denied") {
		e.Errorf("fltgone without its group, handed off: %q, want 403 permission denied", out)
	}
	if st := e.Sh("flexiq-scaled status flood"); strings.Contains(st, "pinned") {
		e.Errorf("the pool was pinned by a caller outside the admin group:\n%s", st)
	}
	// With the group in its process, the same hand-off is an admin's.
	out, _ = e.Try(append([]string{"setpriv", "--reuid=fltgone", "--regid=fltgone", "--init-groups", flood}, pin...)...)
	if !strings.HasPrefix(strings.TrimSpace(out), "200 ") {
		e.Errorf("fltgone with its group, handed off: %q, want 200", out)
	}
}
