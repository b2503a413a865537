// Package eventlog writes the daemon's history: to the journal, with
// structured FLEXIQ_* fields and a fixed MESSAGE_ID per kind of event, when
// the journal is there, and as plain lines on stderr otherwise.
//
// The MESSAGE_IDs make the history queryable without parsing text:
//
//	journalctl MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01          # every decision
//	journalctl -u flexiq-scaled FLEXIQ_POOL=email                    # one pool's history
package eventlog

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// Kind is a kind of event; each has a fixed MESSAGE_ID.
type Kind string

// The IDs never change: admins and tools filter on them.
const (
	Decision       Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01"
	WorkerStarted  Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b02"
	WorkerStopped  Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b03"
	WorkerCrashed  Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b04"
	SourceError    Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b05"
	ConfigReloaded Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b06"
	// Lifecycle covers start, ready, stop and D-Bus reconnects.
	Lifecycle Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b07"
	// SourceRecovered follows a run of SourceError events.
	SourceRecovered Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b08"
	// WorkerDraining is a stop asked of a worker (or seen from outside);
	// its WorkerStopped follows when systemd reports the unit gone.
	WorkerDraining Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b09"
	// RolloutProgress is one step of replacing workers whose definition
	// changed; RolloutDone ends the rollout.
	RolloutProgress Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b0a"
	RolloutDone     Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b0b"
	// HostGuardBlocked is a scale-up the host guard held back, with the
	// host's readings; HostGuardEmergency, a worker it drained because the
	// host is saturated.
	HostGuardBlocked   Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b10"
	HostGuardEmergency Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b11"
	// RuleError is a trigger rule that could not be evaluated (a promql()
	// query failed, a signal it reads is unknown): the pool holds.
	RuleError Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b12"

	// The operator's overrides (flexiq-scaled pause, pin, resume, unpin,
	// and a --for deadline passing), and a dry-run pool's "would scale".
	PoolPaused     Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b30"
	PoolPinned     Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b31"
	PoolResumed    Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b32"
	DryRunDecision Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b33"
)

// Priority is the syslog priority of an entry.
type Priority = journal.Priority

const (
	Err     = journal.PriErr
	Warning = journal.PriWarning
	Notice  = journal.PriNotice
	Info    = journal.PriInfo
)

// Fields are extra journal fields; keys are upper case, e.g. "FLEXIQ_POOL".
type Fields map[string]string

// Logger writes events. It is safe for concurrent use.
type Logger struct {
	mu      sync.Mutex
	journal bool
	w       io.Writer
	tap     func(Kind, Fields)
}

// SetTap has every later event also handed to tap (the metrics count worker
// starts and crashes this way). Set it before the logger is shared.
func (l *Logger) SetTap(tap func(Kind, Fields)) { l.tap = tap }

// New logs to the journal when it is reachable (the daemon runs under
// systemd), and to w otherwise.
func New(w io.Writer) *Logger {
	return &Logger{journal: journal.Enabled(), w: w}
}

// NewWriter always logs to w; for tests and the command line.
func NewWriter(w io.Writer) *Logger { return &Logger{w: w} }

// Event records one event of kind k.
func (l *Logger) Event(k Kind, p Priority, f Fields, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if l.tap != nil {
		l.tap(k, f)
	}
	if l.journal {
		vars := make(map[string]string, len(f)+1)
		maps.Copy(vars, f)
		vars["MESSAGE_ID"] = string(k)
		if err := journal.Send(msg, p, vars); err == nil {
			return
		}
		// Journal gone (journald restarting): fall through to stderr,
		// which systemd also forwards to the journal once it is back.
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s <%d> %s%s\n", time.Now().Format(time.RFC3339), p, msg, renderFields(f))
}

func renderFields(f Fields) string {
	if len(f) == 0 {
		return ""
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(f)) {
		fmt.Fprintf(&b, " %s=%q", k, f[k])
	}
	return b.String()
}

// Throttle decides when a repeating failure is worth a log line: the first
// failure, then at most one per interval, then one line when it recovers.
// The zero value is not ready; use NewThrottle.
type Throttle struct {
	interval   time.Duration
	failing    bool
	lastLogged time.Time
	suppressed int
}

// NewThrottle logs a repeating failure at most once per interval.
func NewThrottle(interval time.Duration) *Throttle { return &Throttle{interval: interval} }

// Fail reports a failure at now. It says whether to log it, and how many
// failures were not logged since the last line.
func (t *Throttle) Fail(now time.Time) (log bool, suppressed int) {
	if !t.failing || now.Sub(t.lastLogged) >= t.interval {
		t.failing, t.lastLogged = true, now
		s := t.suppressed
		t.suppressed = 0
		return true, s
	}
	t.suppressed++
	return false, 0
}

// OK reports a success at now; it says whether this ends a failure run,
// which is then worth one line of its own.
func (t *Throttle) OK() (recovered bool) {
	recovered = t.failing
	t.failing, t.suppressed = false, 0
	return recovered
}
