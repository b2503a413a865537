package eventlog

import (
	"bytes"
	"strings"
	"testing"
	"time"
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
