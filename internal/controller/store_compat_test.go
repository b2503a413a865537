package controller

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/controller/override"
	"github.com/flexiq/flexiq-scaled/internal/controller/workers"
	"github.com/flexiq/flexiq-scaled/internal/poolstore"
)

// The three per-pool files exactly as the daemon before poolstore wrote
// them (json.Marshal of the same structs, captured byte for byte). A
// package upgrade restarts the daemon, which must read them back: the
// operator's pin, the windows and the quiet phase survive it. MONO stands
// for nanoseconds of the rig's monotonic clock, so that the state is fresh.
const (
	oldOverrideFile = `{"version":1,"pool":"work","kind":"pinned","workers":3,"since":"2026-12-01T15:00:00Z","until":"2026-12-01T15:10:00Z","by":"uid 1000 (alice)"}`
	oldStateFile    = `{"version":1,"pool":"work","saved_at_mono_ns":MONO-1,"target":3,"history":[{"at_mono_ns":MONO-3,"raw":4},{"at_mono_ns":MONO-2,"raw":3}],"backoff":{"2":{"delay_ns":2000000000,"until_mono_ns":MONO+60}},"roll_nonce":"r1","scale_events":[{"at_mono_ns":MONO-3,"change":2}],"rule_fired_mono_ns":{"up":MONO-3},"last_busy_mono_ns":MONO-2}`
	oldQuietFile    = `{"version":1,"pool":"work","units":[{"unit":"flexiq-work@3.service","slot":3,"invocation":"INV","deadline_mono_ns":MONO+5}]}`
)

// atMono puts the rig's monotonic clock, in ns, for MONO±s (seconds).
func atMono(s string, now time.Time) string {
	for _, d := range []int{-3, -2, -1, 5, 60} {
		tag := "MONO" + strconv.Itoa(d)
		if d > 0 {
			tag = "MONO+" + strconv.Itoa(d)
		}
		at := monoSince(now.Add(time.Duration(d) * time.Second))
		s = strings.ReplaceAll(s, tag, strconv.FormatInt(int64(at), 10))
	}
	return s
}

func TestFilesOfTheOldDaemonStillLoad(t *testing.T) {
	wall := &wallClock{now: time.Date(2026, 12, 1, 15, 5, 0, 0, time.UTC)}
	r := newRig(t, quietPool())
	r.pool = r.overridePool(wall)
	r.start(r.pool)
	r.src.set(30, 0, nil)
	r.tick(time.Second)
	quieted := "flexiq-work@3.service"
	inv := r.sd.units[quieted].InvocationID

	now := r.clock.Now()
	files := map[string]string{
		"override-work.json": oldOverrideFile,
		"pool-work.json":     atMono(oldStateFile, now),
		"quiet-work.json":    strings.Replace(atMono(oldQuietFile, now), "INV", inv, 1),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The upgrade: a new daemon's pool on the same directories.
	r.pool = r.overridePool(wall)
	r.start(r.pool)
	if got := r.lines("ignoring its"); len(got) != 0 {
		t.Errorf("a file of the old daemon ignored:\n%s", strings.Join(got, "\n"))
	}
	o := r.pool.pub.Override()
	want := api.Override{Kind: api.OverridePinned, Workers: 3, By: "uid 1000 (alice)",
		Since: time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC), Until: time.Date(2026, 12, 1, 15, 10, 0, 0, time.UTC)}
	if !o.Since.Equal(want.Since) || !o.Until.Equal(want.Until) || o.Kind != want.Kind || o.Workers != want.Workers || o.By != want.By {
		t.Errorf("override %+v, want %+v", o, want)
	}
	if len(r.lines("restored its override", "pinned at 3")) != 1 {
		t.Errorf("no restored-override line:\n%s", r.log)
	}
	if len(r.lines("restored its state from", "target 3, 2 recommendations")) != 1 {
		t.Errorf("no restored-state line:\n%s", r.log)
	}
	if r.pool.workers.Roll.Nonce != "r1" {
		t.Errorf("rollout nonce %q, want r1", r.pool.workers.Roll.Nonce)
	}
	if b := r.pool.workers.Slots.Backoff[2]; b == nil || b.Delay != 2*time.Second {
		t.Errorf("slot 2's backoff %+v, want a delay of 2s", b)
	}
	if len(r.lines("resumed the quiet phase of "+quieted)) != 1 {
		t.Errorf("no resumed quiet phase:\n%s", r.log)
	}
	if st := r.pool.Status(); st.Draining != 1 {
		t.Errorf("status %+v: want the quiet worker draining", st)
	}
	// The new daemon writes the quiet file back as the old one did.
	if b, _ := os.ReadFile(r.pool.workers.QuietFile.Path()); string(b) != files["quiet-work.json"] {
		t.Errorf("quiet file rewritten as\n%s\nwant\n%s", b, files["quiet-work.json"])
	}
}

// Each store writes back what it read, byte for byte: the new daemon's
// files are the old daemon's format.
func TestStoresWriteTheOldFormat(t *testing.T) {
	now := monoTime(1000 * time.Hour)
	roundTrip(t, poolstore.Store[override.File]{Prefix: "override-"}, oldOverrideFile)
	roundTrip(t, poolstore.Store[savedState]{Prefix: "pool-"}, atMono(oldStateFile, now))
	roundTrip(t, poolstore.Store[workers.SavedQuiet]{Prefix: "quiet-"}, strings.Replace(atMono(oldQuietFile, now), "INV", "abc", 1))
}

func roundTrip[T any](t *testing.T, s poolstore.Store[T], content string) {
	t.Helper()
	s.Dir = t.TempDir()
	if err := os.WriteFile(s.Path("work"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	v, ok, err := s.Load("work")
	if !ok || err != nil {
		t.Fatalf("%s: ok %v, %v", s.Prefix, ok, err)
	}
	if err := s.Remove("work"); err != nil {
		t.Fatal(err)
	}
	if err := s.Save("work", v); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(s.Path("work")); string(b) != content {
		t.Errorf("%s written as\n%s\nwant\n%s", s.Prefix, b, content)
	}
}
