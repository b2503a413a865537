package workers

import (
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/units"
)

func TestSpecRevision(t *testing.T) {
	base := units.WorkerSpec{Pool: "work", Exec: []string{"/bin/w"}, User: "flexiq", Environment: map[string]string{"A": "1", "B": "2"}}
	rev := specRevision(base, "")
	same := base
	same.Slot, same.Revision = 7, "anything"
	same.Environment = map[string]string{"B": "2", "A": "1"}
	if got := specRevision(same, ""); got != rev {
		t.Errorf("slot, revision or map order changed the revision: %s vs %s", got, rev)
	}
	for name, change := range map[string]func(s *units.WorkerSpec){
		"exec":        func(s *units.WorkerSpec) { s.Exec = []string{"/bin/w", "--fast"} },
		"user":        func(s *units.WorkerSpec) { s.User = "nobody" },
		"environment": func(s *units.WorkerSpec) { s.Environment = map[string]string{"A": "1", "B": "3"} },
		"limits":      func(s *units.WorkerSpec) { s.MemoryMax = 1 << 30 },
		"drain":       func(s *units.WorkerSpec) { s.KillSignal = 2 },
	} {
		s := base
		change(&s)
		if specRevision(s, "") == rev {
			t.Errorf("a change of %s kept the revision", name)
		}
	}
	if specRevision(base, "nonce") == rev {
		t.Error("a roll nonce kept the revision")
	}
	if len(rev) != 12 {
		t.Errorf("revision %q, want 12 hex digits", rev)
	}
	// A field a later version adds, left at its zero value, must not
	// change the revision: that is what the zero-skipping is for. Here,
	// WorkingDirectory stands in for such a field.
	if base.WorkingDirectory != "" {
		t.Fatal("test assumes WorkingDirectory unset")
	}
}
