package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// switchingReplica answers every request with 101 Switching Protocols and
// holds the socket: the probe's connection is then the replica's.
const switchingReplica = `import os, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(os.environ["FLEXIQ_PORT_HTTP"])))
s.listen(16)
held = []
while True:
    c, _ = s.accept()
    c.recv(65536)
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
    held.append(c)
`

// A replica that answers its HTTP probe with 101 and holds the socket
// cannot hold the daemon (issue 27, item 2): the reload that drops the
// probe (and closes the prober) returns within 2 s, the loop answers
// status right after, and the watchdog never kills the daemon.
func TestProbeSwitchingProtocols(t *testing.T) {
	e := setup(t, "probe-101")
	e.Write("/usr/local/lib/switch101.py", switchingReplica)
	pool := func(readiness string) string {
		return `
[pools.web]
exec = ["/usr/bin/python3", "/usr/local/lib/switch101.py"]
min_workers = 1
max_workers = 1
poll_interval_sec = 1
target_cpu_utilisation = 0.8

[pools.web.service.ports]
http = "auto"

[pools.web.service.readiness]
` + readiness
	}
	e.Configure(pool("type = \"http\"\npath = \"/health\"\nport = \"http\"\nperiod_sec = 1\ntimeout_sec = 1\n"))
	e.StartDaemon()
	e.waitLive("web", 1, 30*time.Second)
	// Probed a few times (period 1 s): on the code before the fix, the
	// first attempt's connection was held from then on.
	time.Sleep(4 * time.Second)
	pid, restarts := e.DaemonPID(), e.UnitProp(daemonUnit, "NRestarts")

	e.Configure(pool("type = \"active\"\n"))
	t0 := time.Now()
	out, err := e.Try("systemctl", "reload", daemonUnit)
	reload := time.Since(t0)
	if err != nil {
		e.Errorf("reload: %v\n%s", err, out)
	}
	t1 := time.Now()
	out, err = e.Try("flexiq-scaled", "status", "web")
	status := time.Since(t1)
	if err != nil {
		e.Errorf("status after the reload: %v\n%s", err, out)
	}
	t.Logf("reload returned in %s, status in %s", reload.Round(time.Millisecond), status.Round(time.Millisecond))
	if reload > 2*time.Second {
		e.Errorf("the reload took %s, want under 2 s", reload.Round(time.Millisecond))
	}
	// Past the watchdog's period, so that a stuck loop would have shown.
	time.Sleep(2 * watchdogSec * time.Second)
	if got := e.DaemonPID(); got != pid {
		e.Errorf("the daemon was restarted: MainPID %d, was %d", got, pid)
	}
	if got := e.UnitProp(daemonUnit, "NRestarts"); got != restarts || got != "0" {
		e.Errorf("NRestarts %s (was %s), want 0", got, restarts)
	}
	if j := e.JournalText("-u", daemonUnit, "--grep", "[Ww]atchdog"); strings.TrimSpace(j) != "" && !strings.Contains(j, "No entries") {
		e.Errorf("watchdog trouble in the journal:\n%s", j)
	}
	e.figure("reload", reload, "status_after", status, "daemon_pid_kept", fmt.Sprint(e.DaemonPID() == pid))
}
