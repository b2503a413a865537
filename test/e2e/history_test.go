package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// journalSend writes one journal entry with the native protocol, as
// logger --journald does, and stays alive a second after: journald reads
// the sender's unit from its cgroup when the entry arrives, which a
// process that has already exited no longer has. "FIELD=VALUE"... are the
// arguments; "FIELD=@N" is N fields FIELD0000..., 4,000 bytes of 0xff
// each, which journalctl -o json prints as arrays of numbers, 16 KB each.
const journalSend = `import socket, sys, time
data = b""
for a in sys.argv[1:]:
    k, v = a.split("=", 1)
    if v.startswith("@"):
        for i in range(int(v[1:])):
            data += b"%s%04d=%s\n" % (k.encode(), i, b"\xff" * 4000)
    else:
        data += a.encode() + b"\n"
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
try:
    s.sendto(data, "/run/systemd/journal/socket")
except OSError:
    # Too big for a datagram: journald takes a sealed memfd instead.
    import os, array
    fd = os.memfd_create("entry", os.MFD_ALLOW_SEALING)
    os.write(fd, data)
    import fcntl
    fcntl.fcntl(fd, 1033, 15)  # F_ADD_SEALS: seal, shrink, grow, write
    s.sendmsg([], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))], 0, "/run/systemd/journal/socket")
time.sleep(1)
`

// history draws a known sequence of decision entries, written to the
// journal with the daemon's fields by the daemon's unit as root, into the
// expected series; entries that other users write with the same fields,
// and lines too long to be a decision, are left out.
func TestHistoryFromJournal(t *testing.T) {
	parallel(t)
	e := setup(t)
	pool := fmt.Sprintf("hist%d", time.Now().UnixNano()%1_000_000)
	// The unit's /tmp and /var/tmp are its own: the script lives in /usr.
	e.Write("/usr/local/lib/flexiq-e2e-journal-send.py", journalSend)
	var script strings.Builder
	for _, d := range []struct {
		action                          string
		current, desired, pending, runs int
	}{
		{"scale-up", 1, 3, 30, 4},
		{"stable", 3, 3, 5, 6},
		{"scale-down", 3, 1, 0, 1},
	} {
		fmt.Fprintf(&script, "/usr/bin/python3 /usr/local/lib/flexiq-e2e-journal-send.py MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01 'MESSAGE=pool=%[1]s test decision' "+
			"FLEXIQ_POOL=%[1]s FLEXIQ_ACTION=%[2]s FLEXIQ_CURRENT=%[3]d FLEXIQ_DESIRED=%[4]d FLEXIQ_PENDING=%[5]d FLEXIQ_RUNNING=%[6]d\n",
			pool, d.action, d.current, d.desired, d.pending, d.runs)
	}
	// The daemon's unit, made a one-shot that writes the entries: only
	// its entries, as root, are the daemon's (setup's cleanup removes the
	// drop-in).
	e.Write("/usr/local/lib/flexiq-e2e-history.sh", script.String())
	e.Write("/etc/systemd/system/flexiq-scaled.service.d/90-history.conf",
		"[Service]\nType=oneshot\nWatchdogSec=0\nExecStart=\nExecStart=/bin/sh /usr/local/lib/flexiq-e2e-history.sh\nExecReload=\n")
	e.Sh("systemctl daemon-reload && systemctl start " + daemonUnit)
	// Forged by uid 1000, whatever unit it runs in: a decision that
	// would chart a scale-up to 500, and a line of over 4 MiB (300
	// binary fields, each short enough for journalctl -o json to print).
	e.Sh("setpriv --reuid 1000 --regid 1000 --clear-groups /usr/bin/python3 /usr/local/lib/flexiq-e2e-journal-send.py MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01 " +
		"'MESSAGE=pool=" + pool + " forged' FLEXIQ_POOL=" + pool + " FLEXIQ_ACTION=scale-up FLEXIQ_CURRENT=3 FLEXIQ_DESIRED=500 FLEXIQ_PENDING=9999 FLEXIQ_RUNNING=0")
	e.Sh("setpriv --reuid 1000 --regid 1000 --clear-groups /usr/bin/python3 /usr/local/lib/flexiq-e2e-journal-send.py MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01 " +
		"'MESSAGE=pool=" + pool + " long' FLEXIQ_POOL=" + pool + " FLEXIQ_ACTION=scale-up FLEXIQ_CURRENT=3 FLEXIQ_DESIRED=400 FILLER=@300")
	// Both are in the journal: 2 lines, over 4 MiB (as journalctl prints
	// them; it may take a moment for journald to store them).
	e.Eventually(10*time.Second, "the forged entries in the journal", func() (bool, string) {
		out := strings.Fields(e.Sh("journalctl -o json --no-pager FLEXIQ_POOL=" + pool + " _UID=1000 | wc -lc"))
		return len(out) == 2 && out[0] == "2" && len(out[1]) >= 7 && out[1] > "4194304", strings.Join(out, " ")
	})
	want := []string{",30,4,1,3,scale-up", ",5,6,3,3,stable", ",0,1,3,1,scale-down"}
	e.Eventually(10*time.Second, "the three entries in history --csv", func() (bool, string) {
		out, errs, code := e.run("flexiq-scaled", "history", pool, "--since", "10m", "--csv")
		rows := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(rows) != 4 {
			return false, fmt.Sprintf("exit %d, %q %q", code, out, errs)
		}
		for i, w := range want {
			if !strings.HasSuffix(rows[i+1], w) {
				return false, fmt.Sprintf("row %d %q, want ...%s", i+1, rows[i+1], w)
			}
		}
		return rows[0] == "time,pending,running,live,target,action", out
	})
	// The forged entries' targets (500, 400) in the target column, not
	// anywhere in the line: a timestamp's fraction may read .400761.
	out, errs, _ := e.run("flexiq-scaled", "history", pool, "--since", "10m", "--csv")
	for _, row := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Split(row, ","); len(f) != 6 || f[4] == "500" || f[4] == "400" || f[1] == "9999" {
			t.Errorf("forged entry charted (row %q):\n%s%s", row, out, errs)
		}
	}
	chart, errs, code := e.run("flexiq-scaled", "history", pool, "--since", "10m", "--width", "40")
	if code != 0 || !strings.Contains(chart, "3 decisions") || !strings.Contains(chart, "^") ||
		!strings.Contains(chart, "v  scale events") || !strings.Contains(chart, "pending (max 30)") {
		t.Errorf("chart: exit %d\n%s%s", code, chart, errs)
	}
	t.Logf("history chart:\n%s", chart)

	out, errs, code = e.run("flexiq-scaled", "history", pool, "--since", "10m", "--svg", "/var/tmp/history.svg")
	if code != 0 {
		t.Fatalf("history --svg: exit %d\n%s%s", code, out, errs)
	}
	svg := e.Sh("cat /var/tmp/history.svg")
	for _, want := range []string{"<svg", "pending", "live workers", "target", "scale-up", "scale-down"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if n := strings.Count(svg, "<path"); n < 3 {
		t.Errorf("SVG has %d paths, want one per series at least", n)
	}

	// Without its helper, drawing fails with a message that says where the
	// helper was looked for; the text chart does not need it.
	helper := "/usr/libexec/flexiq-scaled/flexiq-scaled-plot"
	e.Sh("mv " + helper + " " + helper + ".away")
	t.Cleanup(func() { e.Sh("mv " + helper + ".away " + helper) })
	out, errs, code = e.run("flexiq-scaled", "history", pool, "--since", "10m", "--png", "/var/tmp/history.png")
	if code == 0 || !strings.Contains(errs, "drawing needs flexiq-scaled-plot, which is in neither /usr/bin/flexiq-scaled-plot nor "+helper) {
		t.Errorf("history --png without the helper: exit %d\n%s%s", code, out, errs)
	}
	if _, errs, code := e.run("flexiq-scaled", "history", pool, "--since", "10m"); code != 0 {
		t.Errorf("history without the helper: exit %d\n%s", code, errs)
	}
}
