package services

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// socketPool is webPool with its http port bound by systemd (issue 27,
// item 1): an auto port in a transient socket unit per replica.
const socketPool = `
[pools.web]
exec = ["/usr/local/bin/flexiq-testservice", "-latency", "20ms", "-ready-after", "1s"]
min_workers = 1
max_workers = 4
poll_interval_sec = 1
target_cpu_utilisation = 0.8

[pools.web.service]
drain_period_sec = 3

[pools.web.service.ports]
http = { port = "auto", socket = true }
` + behindNginx

// TestSocketActivatedPool: a pool whose port systemd binds reaches its
// target, each replica serving the socket that its flexiq-web@N.socket
// holds; it serves through nginx with no failed request while the daemon
// restarts (replicas and sockets stay, the same invocations) and while it
// scales down, which stops each replica's socket with its service.
func TestSocketActivatedPool(t *testing.T) {
	e := boot(t)
	e.configureWeb(socketPool)
	e.StartDaemon()
	e.CLI("pin", "web", "3")
	before := e.waitDiscovered("web", 3, 30*time.Second)
	for _, r := range before {
		sock := strings.TrimSuffix(r.Unit, ".service") + ".socket"
		st := e.Sh("systemctl show -p ActiveState -p Listen -p FileDescriptorName -p Slice " + sock)
		want := fmt.Sprintf("Listen=127.0.0.1:%d (Stream)", r.Ports["http"])
		if !strings.Contains(st, "ActiveState=active") || !strings.Contains(st, want) || !strings.Contains(st, "FileDescriptorName=http") || !strings.Contains(st, "Slice=flexiq-web.slice") {
			t.Errorf("%s: %s, want active, %s, FileDescriptorName=http, Slice=flexiq-web.slice", sock, st, want)
		}
		// The port is held by systemd and by the replica's own process
		// (at fd 3 as passed, or at the dup that Go's net.FileListener
		// makes before go-systemd closes fd 3): nobody else's.
		pid := strings.TrimSpace(e.Sh("systemctl show -p MainPID --value " + r.Unit))
		holders := e.Sh(fmt.Sprintf("ss -Hltnp 'sport = :%d'", r.Ports["http"]))
		if !strings.Contains(holders, ",pid="+pid+",fd=") || !strings.Contains(holders, `("systemd",pid=1,`) || strings.Count(holders, "pid=") != 2 {
			t.Errorf("%s: port %d held by %q, want systemd and the replica (pid %s) alone", r.Unit, r.Ports["http"], holders, pid)
		}
	}
	e.startNginx(nginxSite)
	invBefore := e.invocations(before)

	const rate, length = 100, 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), length+time.Minute)
	defer cancel()
	res := make(chan error, 1)
	var failed, sent int
	go func() {
		r, err := e.loadgen(ctx, "http://127.0.0.1:8080/", rate, length)
		failed, sent = r.Failed(), r.Sent
		if err == nil && r.Failed() != 0 {
			err = fmt.Errorf("%d of %d requests failed: %s", r.Failed(), r.Sent, r)
		}
		res <- err
	}()
	time.Sleep(3 * time.Second)
	e.Sh("systemctl restart " + daemonUnit)
	time.Sleep(5 * time.Second)
	after, err := e.discovered("web")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("discovery after the restart:\n%+v\nbefore:\n%+v", after, before)
	}
	if got := e.invocations(before); got != invBefore {
		t.Errorf("replicas restarted with the daemon: invocations before %s, after %s", invBefore, got)
	}
	if got := e.socketUnits(); len(got) != 3 {
		t.Errorf("after the daemon's restart, socket units %v, want 3 active", got)
	}

	e.CLI("pin", "web", "1")
	e.waitDiscovered("web", 1, 30*time.Second)
	e.Eventually(time.Minute, "2 replicas and their sockets stopped", func() (bool, string) {
		u, s := e.Workers("web", "active", "activating", "deactivating"), e.socketUnits()
		return len(u) == 1 && len(s) == 1, fmt.Sprintf("services %v, sockets %v", u, s)
	})
	if err := <-res; err != nil {
		t.Error(err)
	}
	e.figure("socket-activation", "sent", sent, "failed", failed)
	if loaded := e.Sh("systemctl list-units --all --plain --no-legend 'flexiq-web@*.socket' | wc -l"); strings.TrimSpace(loaded) != "1" {
		t.Errorf("%s socket units loaded after the scale-down, want 1", strings.TrimSpace(loaded))
	}
}

// socketUnits lists the web pool's active socket units.
func (e *env) socketUnits() []string {
	e.T.Helper()
	out, _ := e.Try("systemctl", "list-units", "--plain", "--no-legend", "--state=active", "flexiq-web@*.socket")
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "flexiq-") {
			names = append(names, f[0])
		}
	}
	return names
}
