package controller

import (
	"strings"
	"testing"
	"time"
)

// The pool's entries read as they did when each call wrote "pool=%s" and
// FLEXIQ_POOL by hand: the prefix once at the start of the message, and the
// field once, for every kind of entry a start and a scale-up write.
func TestPoolEntriesCarryThePoolOnce(t *testing.T) {
	r := newRig(t, testPool("email"))
	r.start(r.pool)
	r.src.set(40, 0, nil)
	r.tick(time.Second)
	lines := strings.Split(strings.TrimSpace(r.log.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("want entries for the start and the scale-up, got:\n%s", r.log.String())
	}
	for _, l := range lines {
		// "TIME <PRIORITY> MESSAGE FIELDS"
		_, msg, _ := strings.Cut(l, "> ")
		if !strings.HasPrefix(msg, "pool=email ") || strings.HasPrefix(msg, "pool=email pool=") {
			t.Errorf("message does not start with one pool=email: %q", l)
		}
		if n := strings.Count(l, `FLEXIQ_POOL="email"`); n != 1 {
			t.Errorf("FLEXIQ_POOL %d times, want once: %q", n, l)
		}
	}
}
