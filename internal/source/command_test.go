package source

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func TestParseCommandOutput(t *testing.T) {
	for _, tt := range []struct {
		out     string
		want    Counts
		wantErr string
	}{
		{out: `{"pending": 3, "running": 1}`, want: Counts{Pending: 3, Running: 1}},
		{out: "  {\"pending\":0,\"running\":0}\n\n", want: Counts{}},
		{out: `{"pending": 3, "running": 1, "paused": 7, "oldest_age_sec": 2.5}`,
			want: Counts{Pending: 3, Running: 1, Paused: 7, OldestAge: 2500 * time.Millisecond, HasOldest: true}},
		{out: `{"pending": 3.0, "running": 1e1}`, want: Counts{Pending: 3, Running: 10}},
		{out: `{"pending": 0, "running": 2, "oldest_age_sec": 9}`, want: Counts{Running: 2}}, // no age with nothing pending
		{out: `{"pending": 2, "running": 0, "oldest_age_sec": null}`, want: Counts{Pending: 2}},
		{out: ``, wantErr: "not a JSON object"},
		{out: `pending=3`, wantErr: "not a JSON object"},
		{out: `[3, 1]`, wantErr: "not a JSON object"},
		{out: `null`, wantErr: "not a JSON object"},
		{out: `{"pending": 3, "running": 1} trailing`, wantErr: "more than the one JSON object"},
		{out: `{"pending": 3, "running": 1}{"pending": 4, "running": 1}`, wantErr: "more than the one JSON object"},
		{out: `{"pending": 3}`, wantErr: `"running" is missing`},
		{out: `{"running": 3}`, wantErr: `"pending" is missing`},
		{out: `{"pending": null, "running": 3}`, wantErr: `"pending" is missing`},
		{out: `{"pending": -1, "running": 3}`, wantErr: `"pending" is -1: must not be negative`},
		{out: `{"pending": 1, "running": 3, "oldest_age_sec": -2}`, wantErr: `"oldest_age_sec" is -2: must not be negative`},
		{out: `{"pending": 1.5, "running": 3}`, wantErr: "not a whole number"},
		{out: `{"pending": "3", "running": 3}`, wantErr: `must be a number, not "3"`},
		{out: `{"pending": true, "running": 3}`, wantErr: "must be a number, not true"},
		{out: `{"pending": 1e300, "running": 3}`, wantErr: "out of range"},
		{out: `{"pending": 1, "running": 3, "oldest_age": 4}`, wantErr: `unknown key "oldest_age"`},
	} {
		got, err := parseCommandOutput([]byte(tt.out))
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", tt.out, err, tt.wantErr)
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.out, err)
		case tt.wantErr == "" && got != tt.want:
			t.Errorf("%s: got %+v, want %+v", tt.out, got, tt.want)
		}
	}
}

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func commandSpec(timeoutSec float64, argv ...string) config.Source {
	return config.Source{Type: TypeCommand, Settings: CommandSettings{Command: argv, TimeoutSec: timeoutSec}}
}

// A command that works gives its counts; one that fails is a hold whose
// error names the command and carries its first lines of stderr.
func TestCommandRuns(t *testing.T) {
	ok := script(t, `echo "ignored" >&2; printf '{"pending": %s, "running": 2, "oldest_age_sec": 1.5}\n' "$1"`)
	got, err := mustNew(t, commandSpec(5, ok, "7")).Observe(context.Background(), time.Now())
	if err != nil || got != (Counts{Pending: 7, Running: 2, OldestAge: 1500 * time.Millisecond, HasOldest: true}) {
		t.Errorf("got %+v, %v", got, err)
	}

	for _, tt := range []struct {
		name, body string
		wantErr    []string
	}{
		{"exit status", `echo '{"pending": 1, "running": 0}'; echo "cannot reach the broker" >&2; echo line2 >&2; exit 3`,
			[]string{"exit status 3", "stderr: cannot reach the broker | line2"}},
		{"long stderr", `for i in 1 2 3 4 5 6 7 8; do echo "err $i" >&2; done; exit 1`,
			[]string{"err 1 | err 2 | err 3 | err 4 | err 5 | ..."}},
		{"invalid JSON", `echo 'pending: 3'`, []string{"not a JSON object", `"pending: 3\n"`}},
		{"negative", `echo '{"pending": -3, "running": 0}'`, []string{"must not be negative"}},
		{"killed", `kill -9 $$`, []string{"signal: killed"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := script(t, tt.body)
			_, err := mustNew(t, commandSpec(5, path)).Observe(context.Background(), time.Now())
			wantErrContaining(t, err, append(tt.wantErr, "command source "+path)...)
		})
	}

	_, err = mustNew(t, commandSpec(5, "/nonexistent/q")).Observe(context.Background(), time.Now())
	wantErrContaining(t, err, "command source /nonexistent/q", "no such file")
}

// A hung command is killed at its timeout, or at the tick's deadline if
// that comes first, with everything it started: its whole process group.
func TestCommandTimeout(t *testing.T) {
	for _, tt := range []struct {
		name       string
		timeoutSec float64
		tick       time.Duration
	}{
		{"timeout_sec", 0.3, time.Minute},
		{"tick bounds it", 30, 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "child.pid")
			// The child keeps stdout open: Wait must not wait for it.
			path := script(t, `sleep 60 & echo $! > `+pidFile+`; echo "stuck" >&2; wait`)
			ctx, cancel := context.WithTimeout(context.Background(), tt.tick)
			defer cancel()
			start := time.Now()
			_, err := mustNew(t, commandSpec(tt.timeoutSec, path)).Observe(ctx, time.Now())
			took := time.Since(start)
			wantErrContaining(t, err, "command source "+path, "timed out after", "process group was killed", "stderr: stuck")
			if took > 5*time.Second {
				t.Errorf("took %s to give up, want about 300ms", took)
			}
			b, rerr := os.ReadFile(pidFile)
			if rerr != nil {
				t.Fatal(rerr)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if pid <= 0 {
				t.Fatalf("pid file %q", b)
			}
			// The killed child is a zombie of no one of ours, or gone:
			// give the kernel a moment to reap it.
			deadline := time.Now().Add(5 * time.Second)
			for alive(pid) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if alive(pid) {
				t.Errorf("the command's child %d survived its timeout", pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
}

// alive reports whether pid runs (a zombie counts as dead).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command's name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// A command that exits at once leaves nothing behind either.
func TestCommandLeavesNothing(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	path := script(t, `(sleep 60 >/dev/null 2>&1 &  echo $! > `+pidFile+`); echo '{"pending": 1, "running": 0}'`)
	if _, err := mustNew(t, commandSpec(5, path)).Observe(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(5 * time.Second)
	for pid > 0 && alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if pid <= 0 || alive(pid) {
		t.Errorf("background child %q outlived the command", b)
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// The daemon's notification socket and watchdog are not the command's.
func TestCommandEnv(t *testing.T) {
	got := commandEnv([]string{"PATH=/usr/bin", "NOTIFY_SOCKET=/run/systemd/notify", "WATCHDOG_USEC=30000000", "CREDENTIALS_DIRECTORY=/run/credentials/x"})
	if strings.Join(got, " ") != "PATH=/usr/bin CREDENTIALS_DIRECTORY=/run/credentials/x" {
		t.Errorf("commandEnv = %q", got)
	}
}

// A command that prints without end is stopped once its stdout passes the
// limit, with an error that says so, and costs the daemon about the limit
// in memory, not what the command printed; endless stderr is dropped past
// its limit until the timeout. The old buffer's ReadFrom read everything.
func TestCommandEndlessOutput(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		timeout    float64
		want       []string
	}{
		{"stdout", `exec yes '{"pending": 1, "running": 1}'`, 30, []string{"printed more than 64 KiB on stdout, and was stopped"}},
		{"stdout, no newline", `exec tr '\0' x < /dev/zero`, 30, []string{"printed more than 64 KiB on stdout, and was stopped"}},
		{"stderr", `yes 'noise' >&2`, 1, []string{"timed out after", "stderr: noise | noise"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := mustNew(t, commandSpec(tt.timeout, script(t, tt.body)))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := src.Observe(context.Background(), time.Now())
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			wantErrContaining(t, err, tt.want...)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
				t.Errorf("allocated %d KiB reading the output, want about the limit", alloc>>10)
			}
			if took > time.Duration(tt.timeout*float64(time.Second))+5*time.Second {
				t.Errorf("took %s", took)
			}
		})
	}
}

// limitedBuffer keeps its first max bytes, and fails or drops the rest;
// it must not offer ReadFrom, which io.Copy would use instead of Write.
func TestLimitedBuffer(t *testing.T) {
	if _, ok := any(&limitedBuffer{}).(io.ReaderFrom); ok {
		t.Fatal("limitedBuffer is an io.ReaderFrom: io.Copy would bypass its limit")
	}
	for _, fail := range []bool{false, true} {
		b := &limitedBuffer{max: 5, fail: fail}
		n, err := io.Copy(b, strings.NewReader("0123456789"))
		if string(b.Bytes()) != "01234" || !b.over {
			t.Errorf("fail=%v: kept %q, over %v", fail, b.Bytes(), b.over)
		}
		if fail != (err != nil) || (!fail && n != 10) {
			t.Errorf("fail=%v: io.Copy = %d, %v", fail, n, err)
		}
	}
}
