package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

func testControl(t *testing.T, dir string) *control {
	return &control{dir: dir, now: time.Now, logf: t.Logf}
}

// fakeDaemon answers each signal as the daemon does: it reads the pending
// requests of the signal's kind and answers them with verdict.
func fakeDaemon(t *testing.T, dir string, verdict func(Request) Verdict) func(syscall.Signal) error {
	ctl := testControl(t, dir)
	return func(sig syscall.Signal) error {
		op := OpReload
		if sig == syscall.SIGUSR1 {
			op = OpRoll
		}
		go func() {
			for _, r := range ctl.pending(op) {
				ctl.answer(r, verdict(r))
			}
		}()
		return nil
	}
}

func TestAskGetsItsVerdict(t *testing.T) {
	dir := t.TempDir()
	var got Request
	c := &Client{Dir: dir, Wait: 5 * time.Second, Poll: time.Millisecond,
		Signal: fakeDaemon(t, dir, func(r Request) Verdict {
			got = r
			return Verdict{OK: false, Problems: []string{"f: k: bad"}}
		})}
	v, err := c.Ask(Request{Op: OpReload})
	if err != nil {
		t.Fatal(err)
	}
	if v.OK || len(v.Problems) != 1 || v.Problems[0] != "f: k: bad" || v.Nonce != got.Nonce || !validNonce(v.Nonce) {
		t.Errorf("verdict = %+v for request %+v", v, got)
	}
	// Both files are gone: nothing accumulates.
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left: %v", left)
	}
}

func TestRollIsAnnouncedBySIGUSR1(t *testing.T) {
	dir := t.TempDir()
	var sigs []syscall.Signal
	daemon := fakeDaemon(t, dir, func(r Request) Verdict {
		return Verdict{OK: true, Changes: r.Pools}
	})
	c := &Client{Dir: dir, Wait: 5 * time.Second, Poll: time.Millisecond, Signal: func(s syscall.Signal) error {
		sigs = append(sigs, s)
		return daemon(s)
	}}
	v, err := c.Ask(Request{Op: OpRoll, Pools: []string{"email"}, Reason: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK || len(v.Changes) != 1 || v.Changes[0] != "email" {
		t.Errorf("verdict = %+v", v)
	}
	if len(sigs) != 1 || sigs[0] != syscall.SIGUSR1 {
		t.Errorf("signals = %v, want SIGUSR1 only", sigs)
	}
}

// A daemon that does not answer: the command gives up at its bound and
// withdraws its request, so that the daemon never acts on it later.
func TestAskTimesOutAndWithdraws(t *testing.T) {
	dir := t.TempDir()
	c := &Client{Dir: dir, Wait: 200 * time.Millisecond, Poll: 10 * time.Millisecond, Signal: func(syscall.Signal) error { return nil }}
	t0 := time.Now()
	_, err := c.Ask(Request{Op: OpReload})
	if !errors.Is(err, ErrNoVerdict) {
		t.Fatalf("err = %v, want ErrNoVerdict", err)
	}
	if took := time.Since(t0); took < 200*time.Millisecond || took > 5*time.Second {
		t.Errorf("gave up after %s, want about 200ms", took)
	}
	if reqs := testControl(t, dir).pending(OpReload); len(reqs) != 0 {
		t.Errorf("request still pending after the timeout: %v", reqs)
	}
}

// Verdicts for other requests (an earlier reload's, uncollected) and a
// verdict file whose content names another nonce are never taken for this
// request's.
func TestAskIgnoresStaleVerdicts(t *testing.T) {
	dir := t.TempDir()
	stale, _ := json.Marshal(Verdict{Nonce: strings.Repeat("a", 32), OK: true, Changes: []string{"stale"}})
	if err := os.WriteFile(filepath.Join(dir, verdictPrefix+strings.Repeat("a", 32)), stale, 0o600); err != nil {
		t.Fatal(err)
	}
	ctl := testControl(t, dir)
	c := &Client{Dir: dir, Wait: 5 * time.Second, Poll: time.Millisecond, Signal: func(syscall.Signal) error {
		reqs := ctl.pending(OpReload)
		if len(reqs) != 1 {
			t.Errorf("pending = %v, want this request only", reqs)
			return nil
		}
		go func() {
			// First a verdict under our name but for another nonce,
			// then the real one.
			mixed, _ := json.Marshal(Verdict{Nonce: strings.Repeat("b", 32), OK: true, Changes: []string{"mixed up"}})
			_ = writeAtomic(dir, verdictPrefix+reqs[0].Nonce, mixed)
			time.Sleep(50 * time.Millisecond)
			ctl.answer(reqs[0], Verdict{OK: false, Problems: []string{"mine"}})
		}()
		return nil
	}}
	v, err := c.Ask(Request{Op: OpReload})
	if err != nil {
		t.Fatal(err)
	}
	if v.OK || len(v.Problems) != 1 || v.Problems[0] != "mine" {
		t.Errorf("took a verdict that is not its own: %+v", v)
	}
}

func TestAskSignalFailureWithdraws(t *testing.T) {
	dir := t.TempDir()
	c := &Client{Dir: dir, Signal: func(syscall.Signal) error { return errors.New("no such process") }}
	if _, err := c.Ask(Request{Op: OpReload}); err == nil || !strings.Contains(err.Error(), "no such process") {
		t.Fatalf("err = %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left: %v", left)
	}
}

// The daemon's side: requests by kind and oldest first; old ones, old
// uncollected verdicts and malformed requests are dropped.
func TestPending(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	write := func(name string, v any, age time.Duration) {
		t.Helper()
		var b []byte
		if s, ok := v.(string); ok {
			b = []byte(s)
		} else {
			b, _ = json.Marshal(v)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	n := func(c byte) string { return strings.Repeat(string(c), 32) }
	write(requestPrefix+n('1'), Request{Nonce: n('1'), Op: OpReload}, 2*time.Second)
	write(requestPrefix+n('2'), Request{Nonce: n('2'), Op: OpReload}, 5*time.Second)
	write(requestPrefix+n('3'), Request{Nonce: n('3'), Op: OpRoll, Pools: []string{"x"}}, time.Second)
	write(requestPrefix+n('4'), Request{Nonce: n('4'), Op: OpReload}, requestTTL+time.Minute) // its asker gave up
	write(requestPrefix+n('5'), Request{Nonce: n('6'), Op: OpReload}, time.Second)            // name and nonce differ
	write(requestPrefix+n('7'), "{not json", time.Second)
	write(requestPrefix+"short", Request{Nonce: "short", Op: OpReload}, time.Second) // not a nonce
	write(verdictPrefix+n('8'), Verdict{Nonce: n('8')}, requestTTL+time.Minute)      // nobody collected it
	write(verdictPrefix+n('9'), Verdict{Nonce: n('9')}, time.Second)                 // its asker may still come
	write(PIDFile, "1\n", requestTTL+time.Hour)                                      // not ours to judge

	ctl := &control{dir: dir, now: func() time.Time { return now }, logf: t.Logf}
	reqs := ctl.pending(OpReload)
	if len(reqs) != 2 || reqs[0].Nonce != n('2') || reqs[1].Nonce != n('1') {
		t.Errorf("pending reloads = %+v, want 2 then 1", reqs)
	}
	if rolls := ctl.pending(OpRoll); len(rolls) != 1 || rolls[0].Nonce != n('3') {
		t.Errorf("pending rolls = %+v", rolls)
	}
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{PIDFile, requestPrefix + n('1'), requestPrefix + n('2'), requestPrefix + n('3'), verdictPrefix + n('9')}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("files left:\n%v\nwant\n%v", names, want)
	}
}

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

	read := func() string {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification after a kick: %v", err)
		}
		return string(buf[:n])
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
	conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 4096)); err == nil {
		t.Errorf("an unchanged status was sent again (%d bytes)", n)
	}
}
