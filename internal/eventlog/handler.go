package eventlog

// The slog handlers behind Logger: the journal's, from slog-journal; lines
// on a writer, for the command line, tests, and the journal's absence; and
// the fallback from the one to the other.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
	slogjournal "github.com/systemd/slog-journal"
)

const messageIDKey = "MESSAGE_ID"

// journalSocket is where slog-journal sends its datagrams.
const journalSocket = "/run/systemd/journal/socket"

// levelOf is the slog level that slog-journal writes as PRIORITY=p.
func levelOf(p Priority) slog.Level {
	switch p {
	case journal.PriErr:
		return slog.LevelError
	case journal.PriWarning:
		return slog.LevelWarn
	case journal.PriNotice:
		return slogjournal.LevelNotice
	case journal.PriDebug:
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// priorityOf is levelOf's inverse, for the lines.
func priorityOf(l slog.Level) Priority {
	switch l {
	case slog.LevelError:
		return journal.PriErr
	case slog.LevelWarn:
		return journal.PriWarning
	case slogjournal.LevelNotice:
		return journal.PriNotice
	case slog.LevelDebug:
		return journal.PriDebug
	}
	return journal.PriInfo
}

// newJournalHandler is slog-journal's handler, taking every level: which
// events to log is the callers' choice, not a level's.
func newJournalHandler() (slog.Handler, error) {
	return slogjournal.NewHandler(&slogjournal.Options{Level: slog.LevelDebug})
}

// journalAvailable says whether the journal's socket is there. slog-journal
// drops an entry without an error when it is not (ENOENT), where the
// fallback to stderr needs to know.
func journalAvailable() bool {
	_, err := os.Stat(journalSocket)
	return err == nil
}

// fallbackHandler writes to primary, and to fallback when the journal is
// gone (journald restarting) or primary fails: systemd forwards stderr to
// the journal too, once it is back.
type fallbackHandler struct {
	primary, fallback slog.Handler
	available         func() bool
}

func (h *fallbackHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *fallbackHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.available() {
		err := h.primary.Handle(ctx, r.Clone())
		if err == nil {
			return nil
		}
	}
	return h.fallback.Handle(ctx, r)
}

func (h *fallbackHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &fallbackHandler{primary: h.primary.WithAttrs(as), fallback: h.fallback.WithAttrs(as), available: h.available}
}

func (h *fallbackHandler) WithGroup(name string) slog.Handler {
	return &fallbackHandler{primary: h.primary.WithGroup(name), fallback: h.fallback.WithGroup(name), available: h.available}
}

// lineHandler writes one line per entry, as the daemon always has outside
// the journal: "TIME <PRIORITY> MESSAGE KEY="value"...", the fields sorted
// and quoted, MESSAGE_ID left out. Groups are not used by Logger, and
// flatten.
type lineHandler struct {
	mu    *sync.Mutex
	w     io.Writer
	attrs map[string]string
}

func newLineHandler(w io.Writer) *lineHandler {
	return &lineHandler{mu: &sync.Mutex{}, w: w}
}

func (h *lineHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	fields := maps.Clone(h.attrs)
	if fields == nil {
		fields = map[string]string{}
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != messageIDKey {
			fields[a.Key] = a.Value.String()
		}
		return true
	})
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		fmt.Fprintf(&b, " %s=%q", k, fields[k])
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := fmt.Fprintf(h.w, "%s <%d> %s%s\n", time.Now().Format(time.RFC3339), priorityOf(r.Level), r.Message, b.String())
	if err != nil {
		return fmt.Errorf("writing an event: %w", err)
	}
	return nil
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	attrs := maps.Clone(h.attrs)
	if attrs == nil {
		attrs = map[string]string{}
	}
	for _, a := range as {
		attrs[a.Key] = a.Value.String()
	}
	return &lineHandler{mu: h.mu, w: h.w, attrs: attrs}
}

func (h *lineHandler) WithGroup(string) slog.Handler { return h }
