package units_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// noCommandLeft fails the test if a process whose command line holds mark
// runs in the sandbox, or if a command unit of pool is still loaded: a
// command's unit must take everything it started with it.
func noCommandLeft(t *testing.T, ctx context.Context, sb *sandbox.Sandbox, pool, mark string) {
	t.Helper()
	// pgrep exits 1 when nothing matches; "[s]" keeps it from matching
	// the shell that runs it.
	pattern := "[" + mark[:1] + "]" + mark[1:]
	out, err := sb.Exec(ctx, "sh", "-c", "pgrep -af '"+pattern+"'; echo rc=$?")
	if !strings.Contains(out, "rc=1") {
		t.Errorf("processes of the command left behind: %s %v", out, err)
		sb.Exec(ctx, "pkill", "-KILL", "-f", pattern)
	}
	units, _ := sb.Exec(ctx, "systemctl", "list-units", "--all", "--plain", "--no-legend", "flexiq-source-"+pool+"-*")
	if strings.TrimSpace(units) != "" {
		t.Errorf("command units still loaded: %s", units)
	}
}

// A command's output and error come back through the pipes, and how it
// ended is its error; its unit is gone afterwards.
func TestRunCommand(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, time.Minute)
	run := newManager(t, sb).CommandRunner("cmdrun")
	for _, tt := range []struct {
		name, script   string
		stdout, stderr string
		wantErr        string
		args           []string
	}{
		{name: "output", script: `echo '{"pending": 3, "running": 1}'; echo warn >&2`,
			stdout: "{\"pending\": 3, \"running\": 1}\n", stderr: "warn\n"},
		{name: "exit status", script: `echo nope >&2; exit 3`, stderr: "nope\n", wantErr: "exit status 3"},
		{name: "signal", script: `kill -TERM $$`, wantErr: "killed by signal 15"},
		{name: "environment", script: `echo "$FLEXIQ_TEST_VAR $PWD"; test -z "$NOTIFY_SOCKET"`,
			stdout: "hello /\n"},
		// Arguments are passed as written: systemd expands no $VAR.
		{name: "no expansion", script: `printf '%s\n' "$0" "$1"`, args: []string{"$FLEXIQ_TEST_VAR", "${PATH}$$"},
			stdout: "$FLEXIQ_TEST_VAR\n${PATH}$$\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run.RunCommand(ctx, append([]string{"/bin/sh", "-c", tt.script}, tt.args...), []string{"PATH=/usr/bin:/bin", "FLEXIQ_TEST_VAR=hello"}, &stdout, &stderr)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("RunCommand: %v (stderr %q)", err, stderr.String())
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("RunCommand: %v, want an error containing %q", err, tt.wantErr)
			}
			if stdout.String() != tt.stdout || stderr.String() != tt.stderr {
				t.Errorf("stdout %q, stderr %q; want %q, %q", stdout.String(), stderr.String(), tt.stdout, tt.stderr)
			}
		})
	}
	noCommandLeft(t, ctx, sb, "cmdrun", "no such mark")
	if err := run.RunCommand(ctx, []string{"/nonexistent/q"}, nil, &bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing command: %v", err)
	}
}

// A runner As a user runs its commands as that user, in its primary group
// or the one given; the daemon's own runner runs them as root (issue 27:
// a service pool's command probes run as the pool's user).
func TestRunCommandAs(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, time.Minute)
	run := newManager(t, sb).CommandRunner("cmdas")
	for _, tt := range []struct {
		name string
		run  interface {
			RunCommand(context.Context, []string, []string, io.Writer, io.Writer) error
		}
		want string
	}{
		{"the daemon's", run, "0 0\n"},
		{"nobody", run.As("nobody", ""), "65534 65534\n"},
		{"nobody in group daemon", run.As("nobody", "daemon"), "65534 1\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := tt.run.RunCommand(ctx, []string{"/bin/sh", "-c", `echo "$(id -u) $(id -g)"`}, []string{"PATH=/usr/bin:/bin"}, &stdout, &stderr); err != nil {
				t.Fatalf("RunCommand: %v (stderr %q)", err, stderr.String())
			}
			if stdout.String() != tt.want {
				t.Errorf("ran as %q, want %q", stdout.String(), tt.want)
			}
		})
	}
	noCommandLeft(t, ctx, sb, "cmdas", "no such mark")
}

// A command that starts a setsid child and hangs past its timeout is
// stopped with its whole cgroup: the child that left its process group
// dies too, and the unit is gone. One that exits at once leaves no such
// child either.
func TestRunCommandSetsidChild(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, time.Minute)
	run := newManager(t, sb).CommandRunner("cmdsetsid")
	for _, tt := range []struct {
		name, mark, script string
		timeout            time.Duration
		wantErr            string
	}{
		{"hangs past its timeout", "sleep 987.61", `setsid sleep 987.61 </dev/null >/dev/null 2>&1 & echo '{"pending": 1, "running": 0}'; echo started >&2; exec sleep 987.62`,
			time.Second, "stopped: everything in its cgroup was killed"},
		// Its main process gone, systemd stops the unit, which kills
		// the child that holds the pipe: no wait for the timeout.
		{"exits, its child holding stdout", "sleep 987.63", `setsid sleep 987.63 & echo '{"pending": 1, "running": 0}'; exit 0`,
			10 * time.Second, ""},
		{"exits at once", "sleep 987.64", `setsid sleep 987.64 </dev/null >/dev/null 2>&1 & echo '{"pending": 1, "running": 0}'`,
			10 * time.Second, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, tt.timeout)
			defer cancel()
			var stdout, stderr bytes.Buffer
			start := time.Now()
			err := run.RunCommand(cctx, []string{"/bin/sh", "-c", tt.script}, []string{"PATH=/usr/bin:/bin"}, &stdout, &stderr)
			took := time.Since(start)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("RunCommand: %v, want an error containing %q", err, tt.wantErr)
			}
			if took > tt.timeout+5*time.Second || tt.wantErr == "" && took > 5*time.Second {
				t.Errorf("took %s", took)
			}
			if strings.Contains(tt.script, "pending") && stdout.String() != "{\"pending\": 1, \"running\": 0}\n" {
				t.Errorf("stdout %q", stdout.String())
			}
			noCommandLeft(t, ctx, sb, "cmdsetsid", tt.mark)
		})
	}
}

// A write that fails (the source's output limit) stops the command at
// once, with everything it started.
func TestRunCommandWriteFails(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, time.Minute)
	run := newManager(t, sb).CommandRunner("cmdwrite")
	tooMuch := errors.New("too much")
	w := &failAfter{n: 64 << 10, err: tooMuch}
	start := time.Now()
	err := run.RunCommand(ctx, []string{"/bin/sh", "-c", "setsid sleep 987.65 </dev/null >/dev/null 2>&1 & exec yes"}, []string{"PATH=/usr/bin:/bin"}, w, &bytes.Buffer{})
	if !errors.Is(err, tooMuch) {
		t.Fatalf("RunCommand: %v, want %v", err, tooMuch)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s", took)
	}
	noCommandLeft(t, ctx, sb, "cmdwrite", "sleep 987.65")
}

type failAfter struct {
	n   int
	err error
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, f.err
	}
	f.n -= len(p)
	return len(p), nil
}
