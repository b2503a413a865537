package daemon

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

func TestRuntimeDir(t *testing.T) {
	t.Setenv("RUNTIME_DIRECTORY", "")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	if got := RuntimeDir(false); got != "/run/flexiq-scaled" {
		t.Errorf("system: %s", got)
	}
	if got := RuntimeDir(true); got != "/run/user/1000/flexiq-scaled" {
		t.Errorf("user: %s", got)
	}
	t.Setenv("RUNTIME_DIRECTORY", "/run/flexiq-scaled:/run/other")
	if got := RuntimeDir(true); got != "/run/flexiq-scaled" {
		t.Errorf("from systemd: %s", got)
	}
}

func TestIsStalled(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	tests := []struct {
		name                string
		now, last, reloaded time.Time
		poll                time.Duration
		want                bool
	}{
		{"ticking", t0.Add(10 * time.Second), t0, time.Time{}, 5 * time.Second, false},
		{"wedged", t0.Add(5*time.Second + stallGrace + time.Second), t0, time.Time{}, 5 * time.Second, true},
		{"long interval, waiting it out", t0.Add(200 * time.Second), t0, time.Time{}, 300 * time.Second, false},
		// A reload from 300 s to 5 s, 200 s into the old interval:
		// judged from the reload, not from the last tick.
		{"shortened by a reload", t0.Add(200 * time.Second), t0, t0.Add(199 * time.Second), 5 * time.Second, false},
		{"shortened, then wedged", t0.Add(199*time.Second + 5*time.Second + stallGrace + time.Second), t0, t0.Add(199 * time.Second), 5 * time.Second, true},
		{"an old reload is no excuse", t0.Add(10*time.Second + stallGrace), t0, t0.Add(-time.Hour), 5 * time.Second, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := isStalled(tc.now, tc.last, tc.reloaded, tc.poll); got != tc.want {
				t.Errorf("isStalled = %v, want %v", got, tc.want)
			}
		})
	}
}

// A pool's status change reaches systemd at once through OnChange, not at
// the watchdog's next tick (an hour away here).
func TestStatusFollowsChangesAtOnce(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)

	d := &daemon{
		opts: Options{RuntimeDir: dir}, log: eventlog.NewWriter(io.Discard),
		cfg: &config.Config{}, pools: map[string]*runningPool{}, removed: map[string]*removal{},
		statusKick: make(chan struct{}, 1),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.watchdog(ctx, 0, time.Hour)

	// Only STATUS= is this test's: a reload that another test left
	// running may still say RELOADING=1 to whatever NOTIFY_SOCKET is now.
	next := func(deadline time.Duration) (string, error) {
		conn.SetReadDeadline(time.Now().Add(deadline))
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return "", err
			}
			if msg := string(buf[:n]); strings.HasPrefix(msg, "STATUS=") {
				return msg, nil
			}
		}
	}
	read := func() string {
		t.Helper()
		msg, err := next(10 * time.Second)
		if err != nil {
			t.Fatalf("no notification after a kick: %v", err)
		}
		return msg
	}
	d.kickStatus()
	if got := read(); got != "STATUS=no pools configured" {
		t.Errorf("first notification = %q", got)
	}
	rp, err := d.newPool(&config.Pool{Name: "email", MaxWorkers: 4, PollInterval: time.Second,
		Source: config.Source{Type: "flexiq-sqlite", Settings: source.FlexiqSQLiteSettings{Path: filepath.Join(dir, "q.db")}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.pool.Close()
	d.setPool("email", rp)
	// Many kicks coalesce into one update, and none blocks.
	for range 100 {
		d.kickStatus()
	}
	if got := read(); !strings.HasPrefix(got, "STATUS=email 0/4 workers") {
		t.Errorf("after the change: %q", got)
	}
	// An unchanged status is not sent again.
	d.kickStatus()
	if msg, err := next(300 * time.Millisecond); err == nil {
		t.Errorf("an unchanged status was sent again: %q", msg)
	}
}
