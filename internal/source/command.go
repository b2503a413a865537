package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// TypeCommand runs a command that prints the counts as JSON: the escape
// hatch for any queue that no other type reads.
const TypeCommand = "command"

// DefaultCommandTimeoutSec is how long a command source's command may run
// when timeout_sec is not set. The tick bounds it as well.
const DefaultCommandTimeoutSec = 10

// CommandSettings are a command source's keys.
type CommandSettings struct {
	// Command is the argv to run, without a shell: an absolute path, then
	// its arguments.
	Command []string `toml:"command,omitempty"`
	// TimeoutSec bounds each run, in seconds; the pool's tick bounds it too.
	TimeoutSec float64 `toml:"timeout_sec,omitzero"`
}

func init() {
	define(config.SourceType{
		Name: TypeCommand,
		Doc: "Runs a program of yours at every tick, without a shell, as root inside the daemon's sandbox, " +
			"and reads `{\"pending\": N, \"running\": M}` (optionally `paused` and `oldest_age_sec`) " +
			"from its standard output: the escape hatch for any queue that no other type reads.",
		Keys: []config.KeyDoc{
			{Name: "command", Type: "array of strings", Required: true,
				Limits: "an absolute path, then its arguments; not under a directory the daemon's sandbox hides",
				Doc:    "The program to run and its arguments, without a shell and without a search path."},
			{Name: "timeout_sec", Type: "number", Default: "10", Limits: "> 0",
				Doc: "How long one run may take; the pool's tick bounds it too. A command that overruns is stopped, " +
					"with everything it started, and the tick holds."},
		},
	}, 0, decodeCommand, func(s CommandSettings) (Source, error) { return newCommand(s, nil) })
}

// decodeCommand checks a command source: an argv whose program is an
// absolute path the daemon can see, and a positive timeout.
func decodeCommand(d *config.SourceDecoder) CommandSettings {
	var c CommandSettings
	switch {
	case !d.Has("command"):
		d.Errorf("command", `missing: the command to run, as an array (no shell), e.g. ["/usr/local/bin/queue-depth", "--queue", "mail"]`)
	case !d.Strings("command", &c.Command):
	case len(c.Command) == 0:
		d.Errorf("command", "must not be empty: the program's absolute path, then its arguments")
	case !filepath.IsAbs(c.Command[0]):
		d.Errorf("command", "%q must be an absolute path: the command runs without a shell and without a search path", c.Command[0])
	default:
		// The command runs inside the daemon's unit: a program under a
		// directory its sandbox hides would fail at every tick.
		if why, hidden := d.Hidden(c.Command[0]); hidden {
			d.Errorf("command", "%s is invisible to the daemon, which runs the command: %s; install it elsewhere, e.g. under /usr/local/bin",
				c.Command[0], why)
		}
	}
	c.TimeoutSec = DefaultCommandTimeoutSec
	if d.Number("timeout_sec", &c.TimeoutSec) && c.TimeoutSec <= 0 {
		d.Errorf("timeout_sec", "must be > 0")
		c.TimeoutSec = DefaultCommandTimeoutSec
	}
	return c
}

// CommandRunner runs a command source's program. The daemon's runs each
// command in a transient service unit of its own (internal/units), so that
// stopping the unit kills everything the command started, a setsid child
// too; ProcessGroupRunner is the fallback where there is no service
// manager to ask (the observe command, unit tests).
type CommandRunner interface {
	// RunCommand runs argv with env, in /, copying its standard output
	// and error into stdout and stderr, and returns once it has exited and
	// nothing it started is left. A write to stdout or stderr that fails
	// stops the command at once, and RunCommand returns that error. When
	// ctx ends the command is stopped likewise, and the error (returned
	// whatever the command did) says how it was stopped. A command that
	// exits other than with 0 is an error saying how it ended.
	RunCommand(ctx context.Context, argv, env []string, stdout, stderr io.Writer) error
}

// NewWithCommandRunner is New, but a command source runs its program with
// run: the daemon gives each pool a runner that starts transient units.
func NewWithCommandRunner(run CommandRunner) func(config.Source) (Source, error) {
	return func(spec config.Source) (Source, error) {
		if s, ok := spec.Settings.(CommandSettings); ok && spec.Type == TypeCommand {
			return newCommand(s, run)
		}
		return New(spec)
	}
}

// commandSource runs a program at every tick, without a shell, and reads
// {"pending": N, "running": M, "paused": P, "oldest_age_sec": S} from its
// standard output. It runs as the daemon does (root), through a
// CommandRunner that leaves nothing it started behind, at the timeout and
// after every run.
type commandSource struct {
	argv    []string
	timeout time.Duration
	run     CommandRunner
}

func newCommand(spec CommandSettings, run CommandRunner) (*commandSource, error) {
	argv := spec.Command
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("%s source: command is empty", TypeCommand)
	}
	timeout := time.Duration(spec.TimeoutSec * float64(time.Second))
	if timeout <= 0 {
		timeout = DefaultCommandTimeoutSec * time.Second
	}
	if run == nil {
		run = ProcessGroupRunner{}
	}
	return &commandSource{argv: argv, timeout: timeout, run: run}, nil
}

// What is kept of the command's output: its JSON is one short line, and
// its standard error goes into an error message. Output past the limit of
// stdout stops the command (no answer is that long); stderr's is dropped.
const (
	maxCommandStdout = 64 << 10
	maxCommandStderr = 4 << 10
	stderrLines      = 5
)

func (s *commandSource) Observe(ctx context.Context, _ time.Time) (Counts, error) {
	// The tick's deadline bounds the timeout too: a command never delays
	// its pool's next tick.
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	stdout := &limitedBuffer{max: maxCommandStdout, fail: true}
	stderr := &limitedBuffer{max: maxCommandStderr}
	start := time.Now()
	err := s.run.RunCommand(ctx, s.argv, commandEnv(os.Environ()), stdout, stderr)
	name := s.argv[0]
	switch {
	case stdout.over:
		return Counts{}, fmt.Errorf("%s source %s: printed more than %d KiB on stdout, and was stopped (%v)%s",
			TypeCommand, name, maxCommandStdout>>10, err, stderrNote(stderr.Bytes()))
	case ctx.Err() != nil:
		return Counts{}, fmt.Errorf("%s source %s: timed out after %s (%v)%s",
			TypeCommand, name, time.Since(start).Round(time.Millisecond), err, stderrNote(stderr.Bytes()))
	case err != nil:
		return Counts{}, fmt.Errorf("%s source %s: %v%s", TypeCommand, name, err, stderrNote(stderr.Bytes()))
	}
	c, err := parseCommandOutput(stdout.Bytes())
	if err != nil {
		return Counts{}, fmt.Errorf("%s source %s: %w%s", TypeCommand, name, err, stderrNote(stderr.Bytes()))
	}
	return c, nil
}

func (s *commandSource) Close() error { return nil }

// ProcessGroupRunner runs a command as the daemon's child, in a process
// group of its own that is killed whole at the end. A child that leaves the
// group (setsid) escapes it: only a unit's cgroup holds everything. It is
// for where no service manager can be asked: `flexiq-scaled observe` runs
// the command so, as the user who runs observe.
type ProcessGroupRunner struct{}

func (ProcessGroupRunner) RunCommand(ctx context.Context, argv, env []string, stdout, stderr io.Writer) error {
	// A failed write (output over its limit) ends the command at once.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Env = env
	cmd.Stdout = &stopOnError{w: stdout, stop: stop}
	cmd.Stderr = &stopOnError{w: stderr, stop: stop}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	// A background child that keeps the output pipes open must not keep
	// the tick waiting once the group is killed.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if cmd.Process != nil {
		killGroup(cmd) // whatever the command left behind
	}
	switch cause := context.Cause(ctx); {
	case cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded):
		return fmt.Errorf("%w; its process group was killed", cause)
	case ctx.Err() != nil:
		return errors.New("its process group was killed")
	}
	return err
}

// stopOnError passes writes on, and stops the command at the first that
// fails.
type stopOnError struct {
	w    io.Writer
	stop context.CancelCauseFunc
}

func (s *stopOnError) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		s.stop(err)
	}
	return n, err
}

// killGroup kills the command's process group (its PID: Setpgid made it
// the leader).
func killGroup(cmd *exec.Cmd) error {
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// commandEnv is the daemon's environment without what systemd meant for
// the daemon alone: its notification socket, watchdog and sockets. The
// credentials directory stays, so that a command can read a
// LoadCredential= secret.
func commandEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "NOTIFY_SOCKET", "WATCHDOG_PID", "WATCHDOG_USEC", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// stderrNote is the first lines of the command's standard error, for an
// error message.
func stderrNote(b []byte) string {
	text := strings.TrimSpace(string(b))
	if text == "" {
		return ""
	}
	lines := strings.Split(text, "\n")
	if len(lines) > stderrLines {
		lines = append(lines[:stderrLines], "...")
	}
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return "; stderr: " + strings.Join(lines, " | ")
}

// parseCommandOutput reads the one JSON object a command prints:
// "pending" and "running" are required whole numbers >= 0, "paused" an
// optional one, "oldest_age_sec" an optional number of seconds >= 0 (null
// or absent: unknown). Any other key is refused, so that a misspelt one
// does not go silently unread.
func parseCommandOutput(out []byte) (Counts, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(out))
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return Counts{}, fmt.Errorf(`stdout is not a JSON object like {"pending": 3, "running": 1}: %s`, quoteOutput(out))
	}
	if rest := bytes.TrimSpace(out[dec.InputOffset():]); len(rest) > 0 {
		return Counts{}, fmt.Errorf("stdout holds more than the one JSON object: %s", quoteOutput(out))
	}
	for k := range fields {
		switch k {
		case "pending", "running", "paused", "oldest_age_sec":
		default:
			return Counts{}, fmt.Errorf(`unknown key %q in the output (want pending, running, paused, oldest_age_sec)`, k)
		}
	}
	var c Counts
	for _, f := range []struct {
		key      string
		dst      *int64
		required bool
	}{{"pending", &c.Pending, true}, {"running", &c.Running, true}, {"paused", &c.Paused, false}} {
		v, ok, err := jsonNumber(fields, f.key)
		switch {
		case err != nil:
			return Counts{}, err
		case !ok && f.required:
			return Counts{}, fmt.Errorf("%q is missing from the output: %s", f.key, quoteOutput(out))
		case !ok:
			continue
		case v != math.Trunc(v):
			return Counts{}, fmt.Errorf("%q is %v, not a whole number", f.key, v)
		}
		*f.dst = int64(v)
	}
	age, ok, err := jsonNumber(fields, "oldest_age_sec")
	if err != nil {
		return Counts{}, err
	}
	if ok && c.Pending > 0 {
		c.OldestAge, c.HasOldest = time.Duration(age*float64(time.Second)), true
	}
	return c, nil
}

// jsonNumber reads fields[key] as a number >= 0 and below 2^53; null and
// absence are "not there".
func jsonNumber(fields map[string]json.RawMessage, key string) (float64, bool, error) {
	raw, ok := fields[key]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, false, fmt.Errorf("%q must be a number, not %s", key, raw)
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	switch {
	case err != nil || v > maxPromValue:
		return 0, false, fmt.Errorf("%q is %s: out of range", key, raw)
	case v < 0:
		return 0, false, fmt.Errorf("%q is %s: must not be negative", key, raw)
	}
	return v, true, nil
}

// quoteOutput is the start of the command's output, quoted, for an error.
func quoteOutput(b []byte) string {
	const max = 200
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "..."
	}
	return strconv.Quote(string(b))
}

// limitedBuffer keeps the first max bytes written to it. Past them it
// fails the write (fail) or drops the rest (for stderr, which only goes
// into a message). It has no ReadFrom on purpose: io.Copy, as os/exec
// uses, would call a bytes.Buffer's own and read without limit (1 GiB of
// output was 4 GiB allocated). Its memory is max bytes, whatever is
// written.
type limitedBuffer struct {
	buf  []byte
	max  int
	fail bool
	over bool
}

// errOutputTooLong is the write error that stops a command whose stdout is
// over its limit.
var errOutputTooLong = errors.New("output over its limit")

func (b *limitedBuffer) Write(p []byte) (int, error) {
	room := b.max - len(b.buf)
	if len(p) <= room {
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	if room > 0 {
		b.buf = append(b.buf, p[:room]...)
	}
	b.over = true
	if b.fail {
		return max(room, 0), errOutputTooLong
	}
	return len(p), nil
}

// Bytes is what was kept.
func (b *limitedBuffer) Bytes() []byte { return b.buf }
