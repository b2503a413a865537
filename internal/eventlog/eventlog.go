// Package eventlog writes the daemon's history through log/slog: to the
// journal (github.com/systemd/slog-journal), with structured FLEXIQ_* fields
// and a fixed MESSAGE_ID per kind of event, when the journal is there, and
// as plain lines on stderr otherwise.
//
// The MESSAGE_IDs make the history queryable without parsing text:
//
//	journalctl MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01          # every decision
//	journalctl -u flexiq-scaled FLEXIQ_POOL=email                    # one pool's history
package eventlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
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

// Logger writes events through a log/slog handler: the journal's, or lines
// on a writer (handler.go). It is safe for concurrent use.
type Logger struct {
	h      slog.Handler
	shared *shared
	// with are the fields that With added, which every event carries;
	// prefix is what With puts at the start of every MESSAGE.
	with   Fields
	prefix string
}

// shared is what a Logger and those made from it by With have in common.
type shared struct {
	tap func(Kind, Fields)
}

// SetTap has every later event, of this logger and of those made from it
// by With, also handed to tap (the metrics count worker starts and crashes
// this way), with all its fields. Set it before the logger is shared.
func (l *Logger) SetTap(tap func(Kind, Fields)) { l.shared.tap = tap }

// New logs to the journal when it is reachable (the daemon runs under
// systemd), and to w otherwise, or whenever the journal is gone.
func New(w io.Writer) *Logger {
	lines := newLineHandler(w)
	if !journal.Enabled() {
		return newLogger(lines)
	}
	jh, err := newJournalHandler()
	if err != nil {
		return newLogger(lines)
	}
	return newLogger(&fallbackHandler{primary: jh, fallback: lines, available: journalAvailable})
}

// NewWriter always logs to w; for tests and the command line.
func NewWriter(w io.Writer) *Logger { return newLogger(newLineHandler(w)) }

func newLogger(h slog.Handler) *Logger { return &Logger{h: h, shared: &shared{}} }

// With returns a logger whose events all carry the field FLEXIQ_KEY=value
// and whose messages all start with "key=value ": With("pool", name) writes
// what call sites used to write by hand, FLEXIQ_POOL and "pool=NAME ".
func (l *Logger) With(key, value string) *Logger {
	field := "FLEXIQ_" + strings.ToUpper(key)
	with := make(Fields, len(l.with)+1)
	maps.Copy(with, l.with)
	with[field] = value
	return &Logger{
		h:      l.h.WithAttrs([]slog.Attr{slog.String(field, value)}),
		shared: l.shared,
		with:   with,
		prefix: l.prefix + key + "=" + value + " ",
	}
}

// Event records one event of kind k. A field of f that With set already is
// With's.
func (l *Logger) Event(k Kind, p Priority, f Fields, format string, args ...any) {
	msg := l.prefix + fmt.Sprintf(format, args...)
	if tap := l.shared.tap; tap != nil {
		all := maps.Clone(f)
		if all == nil {
			all = make(Fields, len(l.with))
		}
		maps.Copy(all, l.with)
		tap(k, all)
	}
	// No time and no PC: the journal stamps the entry itself, and code
	// locations were never part of the entries.
	r := slog.NewRecord(time.Time{}, levelOf(p), msg, 0)
	r.AddAttrs(slog.String(messageIDKey, string(k)))
	for _, key := range slices.Sorted(maps.Keys(f)) {
		if _, ok := l.with[key]; !ok {
			r.AddAttrs(slog.String(key, f[key]))
		}
	}
	_ = l.h.Handle(context.Background(), r)
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
