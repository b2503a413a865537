package eventlog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	slogjournal "github.com/systemd/slog-journal"
)

// A failing source is logged at its first failure, then at most once per
// interval, then once when it recovers.
func TestThrottle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	th := NewThrottle(time.Minute)
	steps := []struct {
		at             time.Duration
		ok             bool
		wantLog        bool
		wantSuppressed int
	}{
		{0, false, true, 0},
		{5 * time.Second, false, false, 0},
		{30 * time.Second, false, false, 0},
		{61 * time.Second, false, true, 2},
		{62 * time.Second, true, true, 0}, // recovery is one line
		{63 * time.Second, true, false, 0},
		{64 * time.Second, false, true, 0}, // a new failure run starts over
	}
	for i, s := range steps {
		var log bool
		var suppressed int
		if s.ok {
			log = th.OK()
		} else {
			log, suppressed = th.Fail(t0.Add(s.at))
		}
		if log != s.wantLog || suppressed != s.wantSuppressed {
			t.Errorf("step %d (t=%s ok=%v): log=%v suppressed=%d, want %v %d", i, s.at, s.ok, log, suppressed, s.wantLog, s.wantSuppressed)
		}
	}
}

func TestWriterFallbackCarriesFields(t *testing.T) {
	var buf bytes.Buffer
	NewWriter(&buf).Event(Decision, Notice, Fields{"FLEXIQ_POOL": "email", "FLEXIQ_ACTION": "scale-up"}, "pool=%s -> %d", "email", 4)
	got := buf.String()
	for _, want := range []string{"pool=email -> 4", `FLEXIQ_ACTION="scale-up"`, `FLEXIQ_POOL="email"`} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}

// recorder is a journal as the handler sees it: the records it is given.
type recorder struct {
	attrs []slog.Attr
	got   *[]slog.Record
	fail  error
}

func (h *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	if h.fail != nil {
		return h.fail
	}
	r.AddAttrs(h.attrs...)
	*h.got = append(*h.got, r)
	return nil
}
func (h *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &recorder{attrs: append(slices.Clone(h.attrs), as...), got: h.got, fail: h.fail}
}
func (h *recorder) WithGroup(string) slog.Handler { return h }

// entry is a record as the journal stores it: MESSAGE, PRIORITY, fields.
func entry(r slog.Record) map[string]string {
	e := map[string]string{"MESSAGE": r.Message, "PRIORITY": strconv.Itoa(int(priorityOf(r.Level)))}
	r.Attrs(func(a slog.Attr) bool {
		if _, dup := e[a.Key]; dup {
			e[a.Key] += "\x00" + a.Value.String() // a field written twice
		} else {
			e[a.Key] = a.Value.String()
		}
		return true
	})
	return e
}

// With("pool", name) writes the entry that call sites wrote by hand:
// the same MESSAGE, MESSAGE_ID, PRIORITY and fields, to the journal and to
// the lines alike, and hands the tap the pool.
func TestWithWritesWhatCallSitesWrote(t *testing.T) {
	var got []slog.Record
	var lines bytes.Buffer
	l := newLogger(&fallbackHandler{primary: &recorder{got: &got}, fallback: newLineHandler(&lines), available: func() bool { return true }})
	var tapped []Fields
	l.SetTap(func(_ Kind, f Fields) { tapped = append(tapped, f) })

	l.Event(WorkerStarted, Info, Fields{"FLEXIQ_POOL": "email", "FLEXIQ_UNIT": "flexiq-email@1.service"}, "pool=%s started %s", "email", "flexiq-email@1.service")
	pl := l.With("pool", "email")
	pl.Event(WorkerStarted, Info, Fields{"FLEXIQ_UNIT": "flexiq-email@1.service"}, "started %s", "flexiq-email@1.service")
	// A field that With set already is not written twice.
	pl.Event(WorkerStarted, Info, Fields{"FLEXIQ_POOL": "email", "FLEXIQ_UNIT": "flexiq-email@1.service"}, "started %s", "flexiq-email@1.service")

	if len(got) != 3 {
		t.Fatalf("%d records", len(got))
	}
	want := map[string]string{
		"MESSAGE": "pool=email started flexiq-email@1.service", "PRIORITY": "6",
		"MESSAGE_ID": string(WorkerStarted), "FLEXIQ_POOL": "email", "FLEXIQ_UNIT": "flexiq-email@1.service",
	}
	for i, r := range got {
		if e := entry(r); !maps.Equal(e, want) {
			t.Errorf("entry %d = %q\nwant %q", i, e, want)
		}
	}
	for i, f := range tapped {
		if f["FLEXIQ_POOL"] != "email" || f["FLEXIQ_UNIT"] != "flexiq-email@1.service" {
			t.Errorf("tap %d got %v", i, f)
		}
	}
	if len(tapped) != 3 {
		t.Errorf("%d events tapped", len(tapped))
	}
	// Events of a With logger of a With logger carry both.
	l.With("pool", "email").With("slot", "3").Event(Decision, Notice, nil, "x")
	if e := entry(got[3]); e["MESSAGE"] != "pool=email slot=3 x" || e["FLEXIQ_SLOT"] != "3" || e["FLEXIQ_POOL"] != "email" || e["PRIORITY"] != "5" {
		t.Errorf("nested With: %q", e)
	}
	if lines.Len() != 0 {
		t.Errorf("lines written while the journal was there:\n%s", lines.String())
	}
}

// The lines are the same with With as by hand, but for the time.
func TestWithLines(t *testing.T) {
	var byHand, with bytes.Buffer
	NewWriter(&byHand).Event(Decision, Err, Fields{"FLEXIQ_POOL": "email", "FLEXIQ_ACTION": "scale-up"}, "pool=%s -> %d", "email", 4)
	NewWriter(&with).With("pool", "email").Event(Decision, Err, Fields{"FLEXIQ_ACTION": "scale-up"}, "-> %d", 4)
	_, a, _ := strings.Cut(byHand.String(), " ")
	_, b, _ := strings.Cut(with.String(), " ")
	if a != b || a != `<3> pool=email -> 4 FLEXIQ_ACTION="scale-up" FLEXIQ_POOL="email"`+"\n" {
		t.Errorf("by hand %q\nwith    %q", a, b)
	}
}

// When the journal is gone, or refuses an entry, the entry goes to the
// lines, fields and all.
func TestFallbackWhenJournalGone(t *testing.T) {
	for _, tc := range []struct {
		name      string
		available bool
		fail      error
	}{{"socket gone", false, nil}, {"write fails", true, errors.New("ECONNREFUSED")}} {
		t.Run(tc.name, func(t *testing.T) {
			var got []slog.Record
			var lines bytes.Buffer
			l := newLogger(&fallbackHandler{primary: &recorder{got: &got, fail: tc.fail}, fallback: newLineHandler(&lines), available: func() bool { return tc.available }})
			l.With("pool", "email").Event(SourceError, Warning, Fields{"FLEXIQ_ERROR": "boom"}, "source failed")
			if len(got) != 0 || !strings.Contains(lines.String(), `<4> pool=email source failed FLEXIQ_ERROR="boom" FLEXIQ_POOL="email"`) {
				t.Errorf("records %d, lines %q", len(got), lines.String())
			}
		})
	}
}

// Every priority the daemon writes reaches the journal as itself.
func TestPriorities(t *testing.T) {
	for _, p := range []Priority{Err, Warning, Notice, Info} {
		if got := priorityOf(levelOf(p)); got != p {
			t.Errorf("priority %d comes back as %d", p, got)
		}
	}
	// slog-journal's own mapping, which writes PRIORITY=.
	if levelOf(Notice) != slogjournal.LevelNotice || levelOf(Err) != slog.LevelError || levelOf(Warning) != slog.LevelWarn || levelOf(Info) != slog.LevelInfo {
		t.Error("levels are not slog-journal's")
	}
}
