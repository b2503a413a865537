package main

import (
	"encoding/json"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/daemon"
)

// serveRequests plays the daemon for the commands: this test process
// catches SIGHUP and SIGUSR1, and answers every pending request in dir
// with answer(request). It returns the --pid and --runtime-dir flags.
func serveRequests(t *testing.T, answer func(daemon.Request) daemon.Verdict) []string {
	t.Helper()
	dir := t.TempDir()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGUSR1)
	stop := make(chan struct{})
	t.Cleanup(func() { signal.Stop(sigs); close(stop) })
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-sigs:
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), "request.") {
					continue
				}
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					continue
				}
				var r daemon.Request
				if json.Unmarshal(b, &r) != nil {
					continue
				}
				v := answer(r)
				v.Nonce = r.Nonce
				out, _ := json.Marshal(v)
				os.WriteFile(filepath.Join(dir, ".tmp"), out, 0o600)
				os.Rename(filepath.Join(dir, ".tmp"), filepath.Join(dir, "verdict."+r.Nonce))
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}()
	return []string{"--pid", strconv.Itoa(os.Getpid()), "--runtime-dir", dir, "--timeout", "10s"}
}

func TestReloadCommand(t *testing.T) {
	var got daemon.Request
	verdict := daemon.Verdict{OK: true, Changes: []string{"pool email: max_workers"}}
	flags := serveRequests(t, func(r daemon.Request) daemon.Verdict { got = r; return verdict })

	r := invoke(t, append([]string{"reload"}, flags...)...)
	if r.code != 0 || r.stdout != "pool email: max_workers\n" || r.stderr != "" || got.Op != daemon.OpReload {
		t.Errorf("accepted reload: %v (request %+v)", r, got)
	}

	verdict = daemon.Verdict{Problems: []string{"/etc/flexiq-scaled/config.toml: pools.email.max_worker: unknown key"}}
	r = invoke(t, append([]string{"reload"}, flags...)...)
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "rejected") ||
		!strings.Contains(r.stderr, "/etc/flexiq-scaled/config.toml: pools.email.max_worker: unknown key\n") {
		t.Errorf("rejected reload: %v", r)
	}
}

func TestRollCommand(t *testing.T) {
	var got daemon.Request
	flags := serveRequests(t, func(r daemon.Request) daemon.Verdict {
		got = r
		if r.Pools[0] != "email" {
			return daemon.Verdict{Problems: []string{"no such pool: " + r.Pools[0]}}
		}
		return daemon.Verdict{OK: true, Changes: []string{"pool email: rollout requested"}}
	})
	r := invoke(t, append(append([]string{"roll", "--reason", "deploy 42"}, flags...), "email")...)
	if r.code != 0 || !strings.Contains(r.stdout, "rollout requested") || got.Op != daemon.OpRoll || got.Reason != "deploy 42" {
		t.Errorf("roll: %v (request %+v)", r, got)
	}
	r = invoke(t, append(append([]string{"roll"}, flags...), "nope")...)
	if r.code != 1 || !strings.Contains(r.stderr, "no such pool: nope") {
		t.Errorf("roll of an unknown pool: %v", r)
	}
	if r := invoke(t, "roll"); r.code != 2 {
		t.Errorf("roll without a pool: %v", r)
	}
}

// Without a running daemon the commands fail at once and say so, and never
// signal a process that is not flexiq-scaled.
func TestControlWithoutDaemon(t *testing.T) {
	t.Setenv("MAINPID", "")
	dir := t.TempDir()
	r := invoke(t, "reload", "--runtime-dir", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "is flexiq-scaled running?") {
		t.Errorf("no PID file: %v", r)
	}
	// A stale PID file naming this test process, which is not the daemon.
	os.WriteFile(filepath.Join(dir, daemon.PIDFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	r = invoke(t, "roll", "--runtime-dir", dir, "email")
	if r.code != 1 || !strings.Contains(r.stderr, "not a running flexiq-scaled") {
		t.Errorf("stale PID file: %v", r)
	}
}
