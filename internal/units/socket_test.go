package units_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// A worker with a socket (issue 27, item 1): systemd binds the port in
// flexiq-POOL@SLOT.socket, started in the same call as the service, which
// receives it as fd 3 named after the port; a stop takes both down; a port
// already taken fails the start and leaves nothing loaded.
func TestSocketWorker(t *testing.T) {
	sb, ctx := sandbox.Get(t), testContext(t, 60*time.Second)
	m := newManager(t, sb)
	s := sleeper("sock", 1)
	s.Socket = &units.SocketSpec{Name: "http", Address: "127.0.0.1", Port: 18431}
	unit, sock := units.UnitName("sock", 1), units.SocketName("sock", 1)
	t.Cleanup(func() { removeUnit(t, sb, sock) })
	start(t, ctx, m, sb, s)

	if st := show(t, ctx, sb, sock, "ActiveState", "Listen", "FileDescriptorName", "BindsTo"); st["ActiveState"] != "active" ||
		st["Listen"] != "127.0.0.1:18431 (Stream)" || st["FileDescriptorName"] != "http" || st["BindsTo"] != unit {
		t.Errorf("socket: %v", st)
	}
	pid := show(t, ctx, sb, unit, "MainPID")["MainPID"]
	out, err := sb.Exec(ctx, "sh", "-c", "tr '\\0' '\\n' </proc/"+pid+"/environ | grep ^LISTEN_FD; ss -Hltnp 'sport = :18431'")
	if err != nil || !strings.Contains(out, "LISTEN_FDS=1\n") || !strings.Contains(out, "LISTEN_FDNAMES=http\n") ||
		!strings.Contains(out, `"sleep",pid=`+pid+",fd=3") || !strings.Contains(out, `"systemd",pid=1,`) {
		t.Errorf("the worker does not hold the socket as fd 3 beside systemd: %v\n%s", err, out)
	}

	done, err := m.StopWorker(ctx, unit)
	if err != nil {
		t.Fatalf("StopWorker: %v", err)
	}
	select {
	case r := <-done:
		if r != "done" {
			t.Errorf("stop job %s", r)
		}
	case <-ctx.Done():
		t.Fatal("no stop result")
	}
	waitFor(t, ctx, "the socket and the service to be unloaded", func() bool {
		st := show(t, ctx, sb, sock, "LoadState")["LoadState"] + show(t, ctx, sb, unit, "LoadState")["LoadState"]
		return st == "not-foundnot-found"
	})
	if out, _ := sb.Exec(ctx, "ss", "-Hltn", "sport = :18431"); strings.TrimSpace(out) != "" {
		t.Errorf("port still listening after the stop: %s", out)
	}

	// A port someone holds: the socket fails, the service never runs
	// without it, and nothing stays loaded.
	if _, err := sb.Exec(ctx, "systemd-run", "-u", "squat18432", "python3", "-c",
		"import socket,time; s=socket.socket(); s.bind(('127.0.0.1',18432)); s.listen(); time.sleep(600)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeUnit(t, sb, "squat18432.service") })
	waitFor(t, ctx, "the squatter to listen", func() bool {
		out, _ := sb.Exec(ctx, "ss", "-Hltn", "sport = :18432")
		return strings.TrimSpace(out) != ""
	})
	s2 := sleeper("sock", 2)
	s2.Socket = &units.SocketSpec{Name: "http", Address: "127.0.0.1", Port: 18432}
	t.Cleanup(func() { removeUnit(t, sb, units.UnitName("sock", 2)); removeUnit(t, sb, units.SocketName("sock", 2)) })
	err = m.StartWorker(ctx, s2)
	if !errors.Is(err, units.ErrSocketFailed) || !strings.Contains(err.Error(), "result resources") {
		t.Fatalf("StartWorker on a taken port: %v, want ErrSocketFailed with result resources", err)
	}
	waitFor(t, ctx, "nothing of slot 2 loaded", func() bool {
		st := show(t, ctx, sb, units.SocketName("sock", 2), "LoadState")["LoadState"] + show(t, ctx, sb, units.UnitName("sock", 2), "LoadState")["LoadState"]
		return st == "not-foundnot-found"
	})
	// The slot starts again once the port is free: no leftover blocks it.
	removeUnit(t, sb, "squat18432.service")
	start(t, ctx, m, sb, s2)
}

// A real server on the passed socket: Debian's gunicorn (scripts/deps.sh
// installs it) serves a WSGI app on the port that flexiq-POOL@SLOT.socket
// bound, and binds nothing itself. Without --bind: gunicorn reads
// LISTEN_FDS itself, and 20.1 given --bind fd://3 as well takes fd 3
// twice, closes it after the first, and dies of EBADF on the second.
func TestSocketWorkerGunicorn(t *testing.T) {
	sb, ctx := sandbox.Get(t), testContext(t, 60*time.Second)
	m := newManager(t, sb)
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/usr/bin/gunicorn"); err != nil {
		t.Fatalf("gunicorn is not installed (scripts/deps.sh installs it): %v", err)
	}
	s := sleeper("gsock", 1)
	s.Exec = []string{"/usr/bin/gunicorn", "--workers", "1", "--chdir", dir, "hello_wsgi:app"}
	// No __pycache__ in the checkout.
	s.Environment = map[string]string{"PYTHONDONTWRITEBYTECODE": "1"}
	s.Socket = &units.SocketSpec{Name: "http", Address: "127.0.0.1", Port: 18441}
	t.Cleanup(func() { removeUnit(t, sb, units.SocketName("gsock", 1)) })
	unit := start(t, ctx, m, sb, s)
	var out string
	t.Cleanup(func() {
		if t.Failed() {
			j, _ := sb.Exec(context.Background(), "journalctl", "--no-pager", "-n", "40", "-u", unit)
			t.Logf("curl: %v %s\njournal:\n%s", err, out, j)
		}
	})
	waitFor(t, ctx, "gunicorn to answer on the passed socket", func() bool {
		out, err = sb.Exec(ctx, "curl", "-sS", "--max-time", "2", "http://127.0.0.1:18441/")
		return err == nil
	})
	if out != "hello from slot 1\n" {
		t.Errorf("gunicorn answered %q", out)
	}
	// gunicorn's processes and systemd hold the port, nobody else.
	holders, _ := sb.Exec(ctx, "ss", "-Hltnp", "sport = :18441")
	if !strings.Contains(holders, `"gunicorn`) || !strings.Contains(holders, `("systemd",pid=1,`) {
		t.Errorf("port 18441 held by %q", holders)
	}
	if _, err := m.StopWorker(ctx, unit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the port to close", func() bool {
		out, _ := sb.Exec(ctx, "ss", "-Hltn", "sport = :18441")
		return strings.TrimSpace(out) == ""
	})
}

// The drain: StopWorker stops the socket before the service, so the port
// refuses connections as soon as the worker closes its copy on the drain
// signal, while the worker is still finishing its work (here 3 s), rather
// than staying open in systemd's hands until the service is down.
func TestSocketStopClosesPortFirst(t *testing.T) {
	sb, ctx := sandbox.Get(t), testContext(t, 60*time.Second)
	m := newManager(t, sb)
	s := sleeper("dsock", 1)
	// On SIGTERM: close the listening socket, then finish for 3 s.
	// The marker says the trap is set: a SIGTERM before it would end the
	// shell at once (a flake seen in CI's neighbour runs).
	s.Exec = []string{"/bin/sh", "-c", `trap 'exec 3<&-; sleep 3; exit 0' TERM; touch /run/dsock-trapped; while :; do sleep 0.1; done`}
	s.Socket = &units.SocketSpec{Name: "http", Address: "127.0.0.1", Port: 18451}
	t.Cleanup(func() { removeUnit(t, sb, units.SocketName("dsock", 1)) })
	sb.Exec(ctx, "rm", "-f", "/run/dsock-trapped")
	unit := start(t, ctx, m, sb, s)
	waitFor(t, ctx, "the worker's trap", func() bool {
		_, err := sb.Exec(ctx, "test", "-e", "/run/dsock-trapped")
		return err == nil
	})
	if _, err := m.StopWorker(ctx, unit); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	waitFor(t, ctx, "the port to close", func() bool {
		out, _ := sb.Exec(ctx, "ss", "-Hltn", "sport = :18451")
		return strings.TrimSpace(out) == ""
	})
	closed := time.Since(t0)
	if st := show(t, ctx, sb, unit, "ActiveState")["ActiveState"]; st != "deactivating" {
		t.Errorf("the port closed %v after the stop, with the worker %s: want it still draining", closed, st)
	} else {
		t.Logf("port closed %v after StopWorker, the worker still draining", closed.Round(time.Millisecond))
	}
}
