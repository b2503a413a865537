package harness

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// Env is one test's handle on a sandbox with the daemon installed. A suite's
// own env embeds it and adds what is the suite's.
type Env struct {
	T  testing.TB
	SB *sandbox.Sandbox
	// Since ("--since=@UNIX"), when set, limits the journal reads to this
	// test's entries, for a sandbox that tests share one after another.
	Since string
	// JournalLines is how much of the daemon's journal Errorf, Fatalf and
	// Eventually quote; 0 quotes none.
	JournalLines int
	// Poll is how often Eventually checks; 0 is 200 ms.
	Poll time.Duration

	// The test's flexiq queue, after CreateQueue: DB open on the host's
	// file HostDB, which the sandbox (the daemon, the workers) sees as
	// DBPath.
	DB             *sql.DB
	DBPath, HostDB string
}

// Ctx is a context for one command, cancelled when the test ends.
func (e *Env) Ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	e.T.Cleanup(cancel)
	return ctx
}

// Sh runs a shell script (sh -e) inside and returns its output; a failure
// fails the test.
func (e *Env) Sh(script string) string {
	e.T.Helper()
	return e.SB.Sh(e.T, script)
}

// Try runs a command inside and returns its output and error, without
// failing the test.
func (e *Env) Try(argv ...string) (string, error) {
	return Exec(e.SB, 3*time.Minute, argv...)
}

// Write writes a root-owned file inside.
func (e *Env) Write(path, content string) {
	e.T.Helper()
	if err := e.SB.WriteFile(path, content); err != nil {
		e.T.Fatal(err)
	}
}

// Configure writes the daemon's config.toml.
func (e *Env) Configure(toml string) {
	e.T.Helper()
	e.Write("/etc/flexiq-scaled/config.toml", toml)
}

func (e *Env) StartDaemon() {
	e.T.Helper()
	e.Sh("systemctl start " + DaemonUnit)
}

func (e *Env) Reload() {
	e.T.Helper()
	e.Sh("systemctl reload " + DaemonUnit)
}

// CLI runs the flexiq-scaled command inside and fails the test on error.
func (e *Env) CLI(args ...string) string {
	e.T.Helper()
	out, err := e.Try(append([]string{"/usr/bin/flexiq-scaled"}, args...)...)
	if err != nil {
		e.T.Fatalf("flexiq-scaled %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Eventually waits for cond, and fails the test, with the daemon's journal,
// if it does not come true within the time.
func (e *Env) Eventually(within time.Duration, what string, cond func() (bool, string)) {
	e.T.Helper()
	every := e.Poll
	if every == 0 {
		every = 200 * time.Millisecond
	}
	if ok, state := sandbox.Poll(within, every, cond); !ok {
		e.Fatalf("after %s, still no %s (%s)", within, what, state)
	}
}

// Errorf and Fatalf report a failure with the daemon's recent journal,
// which says what it saw and decided.
func (e *Env) Errorf(format string, args ...any) {
	e.T.Helper()
	e.T.Errorf(format+"%s", append(args, e.daemonJournal())...)
}

func (e *Env) Fatalf(format string, args ...any) {
	e.T.Helper()
	e.T.Fatalf(format+"%s", append(args, e.daemonJournal())...)
}

func (e *Env) daemonJournal() string {
	if e.JournalLines == 0 {
		return ""
	}
	return "\ndaemon journal:\n" + e.JournalText("-u", DaemonUnit, "-n", strconv.Itoa(e.JournalLines))
}

// JournalText is the test's journal, read with args, in a readable form.
func (e *Env) JournalText(args ...string) string {
	if e.Since != "" {
		args = append([]string{e.Since}, args...)
	}
	return Journal(e.SB, args...)
}

// Entries returns the test's journal entries that match the arguments.
func (e *Env) Entries(args ...string) []sandbox.JournalEntry {
	e.T.Helper()
	if e.Since != "" {
		args = append([]string{e.Since}, args...)
	}
	entries, err := e.SB.Journal(e.Ctx(), args...)
	if err != nil {
		e.T.Fatal(err)
	}
	return entries
}

// UnitProp reads one property of a unit ("" when systemctl cannot say).
func (e *Env) UnitProp(unit, prop string) string {
	out, _ := e.Try("systemctl", "show", "-P", prop, unit)
	return strings.TrimSpace(out)
}

// DaemonPID is the daemon's main PID inside (0 when it does not run).
func (e *Env) DaemonPID() int {
	pid, _ := strconv.Atoi(e.UnitProp(DaemonUnit, "MainPID"))
	return pid
}

var signalLineRE = regexp.MustCompile(`signal (SIG[A-Z0-9]+) at (\d+)`)

// SignalTimes reads, from a worker unit's journal, when its worker got
// each signal (the test worker logs them with its own clock).
func (e *Env) SignalTimes(unit string) map[string]time.Time {
	out := map[string]time.Time{}
	for _, m := range signalLineRE.FindAllStringSubmatch(e.JournalText("-u", unit, "-o", "cat"), -1) {
		ms, _ := strconv.ParseInt(m[2], 10, 64)
		if _, seen := out[m[1]]; !seen {
			out[m[1]] = time.UnixMilli(ms)
		}
	}
	return out
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9]+`)

// CreateQueue creates an empty flexiq queue database for the test, named
// after it, in hostDir, which the sandbox sees as insideDir (a bind): under
// /var/lib, as on a real host, since the daemon's unit hides /tmp and /home
// from it. The test writes it through the host's path, not through
// /proc/PID/root: SQLite resolves that symlink and would open the host's
// own path. The files belong to flexiq, as the workers run as flexiq.
func (e *Env) CreateQueue(hostDir, insideDir string) {
	e.T.Helper()
	name := strings.ToLower(unsafeName.ReplaceAllString(e.T.Name(), "_"))
	e.HostDB = filepath.Join(hostDir, name+".db")
	e.DBPath = filepath.Join(insideDir, name+".db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(e.HostDB + suffix)
	}
	db, err := flexiqdb.Create(e.HostDB)
	if err != nil {
		e.T.Fatal(err)
	}
	e.DB = db
	e.T.Cleanup(func() { db.Close() })
	e.Sh("chown flexiq:flexiq " + insideDir + " " + e.DBPath + "*")
}

// Enqueue adds n pending jobs of the given duration to the test's queue.
func (e *Env) Enqueue(n int, d time.Duration) {
	e.T.Helper()
	jobs := make([]flexiqdb.Job, n)
	for i := range jobs {
		jobs[i] = flexiqdb.Job{DurationMs: int(d.Milliseconds())}
	}
	if err := flexiqdb.EnqueueMany(e.DB, jobs); err != nil {
		e.T.Fatal(err)
	}
}
