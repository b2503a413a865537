package replicas

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/portowner"
)

// TestGuardHeldSlotEpisode: a fixed port another listens on holds its slot
// back, with one journal entry however often it is asked; a port a
// replica of the pool still holds is not another's; the episode ends
// when the port is free again, and a second asking after that begins a
// new one.
func TestGuardHeldSlotEpisode(t *testing.T) {
	now := time.Unix(1000, 0)
	var listeners []portowner.Listener
	var buf bytes.Buffer
	g := NewGuard(func() time.Time { return now },
		func() (*portowner.Table, error) { return portowner.NewTable(t.TempDir(), listeners), nil },
		eventlog.NewWriter(&buf), func(slot int, unit string, extra eventlog.Fields) eventlog.Fields { return extra })
	defer g.Stop()
	cfg := &config.Pool{Name: "web", Service: &config.Service{Ports: []config.Port{{Name: "http", Base: 8001}}}}
	squat := portowner.Listener{Port: 8002, Addr: netip.MustParseAddr("127.0.0.1"), UID: 1000, Inode: 7}
	none := func(int) bool { return false }
	noReplica := func(int) string { return "" }
	entries := func(s string) int { return strings.Count(buf.String(), s) }

	for _, step := range []struct {
		name      string
		listening []portowner.Listener
		ours      func(int) bool
		wantHeld  map[int]bool
		wantBegun int // "gets no replica" entries so far
		wantEnded int // "is free again" entries so far
	}{
		{"free", nil, none, map[int]bool{}, 0, 0},
		{"squatted", []portowner.Listener{squat}, none, map[int]bool{2: true}, 1, 0},
		{"still squatted: no second entry", []portowner.Listener{squat}, none, map[int]bool{2: true}, 1, 0},
		{"a replica of ours still stopping holds it", []portowner.Listener{squat}, func(p int) bool { return p == 8002 }, map[int]bool{}, 1, 0},
		{"free again", nil, none, map[int]bool{}, 1, 1},
		{"squatted again: a new episode", []portowner.Listener{squat}, none, map[int]bool{2: true}, 2, 1},
	} {
		now = now.Add(time.Second)
		listeners = step.listening
		got := g.HeldSlots(now, cfg, []int{1, 2, 3}, step.ours)
		if len(got) != len(step.wantHeld) || (step.wantHeld[2] && !got[2]) {
			t.Errorf("%s: held slots %v, want %v", step.name, got, step.wantHeld)
		}
		g.EndHeld(now.Add(time.Second), noReplica)
		if n := entries("gets no replica"); n != step.wantBegun {
			t.Errorf("%s: %d episodes begun, want %d:\n%s", step.name, n, step.wantBegun, buf.String())
		}
		if n := entries("is free again"); n != step.wantEnded {
			t.Errorf("%s: %d episodes ended, want %d:\n%s", step.name, n, step.wantEnded, buf.String())
		}
	}
}
