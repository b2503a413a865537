package controller

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// wallClock is the operator's clock, moved by hand.
type wallClock struct{ now time.Time }

func (c *wallClock) Now() time.Time { return c.now }

// overridePool is a pool of the rig with its overrides kept in the rig's
// directory and deadlines on wall.
func (r *rig) overridePool(wall *wallClock) *Pool {
	r.t.Helper()
	p, err := NewPool(r.cfg, r.sd, eventlog.NewWriter(r.log), Options{
		StateDir: r.dir, OverrideDir: r.dir, Clock: r.clock.Now, WallClock: wall.Now,
		NewSource: func(config.Source) (source.Source, error) { return r.src, nil },
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

func (r *rig) wantActive(n int, when string) {
	r.t.Helper()
	if got := r.sd.count("active"); got != n {
		r.t.Fatalf("%s: %d active, want %d\n%s", when, got, n, r.log)
	}
}

func TestPauseAndPinSurviveRestartAndExpire(t *testing.T) {
	wall := &wallClock{now: time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)}
	r := newRig(t, testPool("work"))
	r.sd.stopNow = true
	r.pool = r.overridePool(wall)
	r.start(r.pool)
	r.src.set(50, 0, nil) // depth 5
	r.tick(time.Second)
	r.wantActive(5, "before the pause")

	o, err := r.pool.SetOverride(api.Override{Kind: api.OverridePaused, Until: wall.now.Add(10 * time.Minute), By: "test"})
	if err != nil || o.Kind != api.OverridePaused {
		t.Fatalf("pause: %+v, %v", o, err)
	}
	if got := r.pool.Status().String(); !strings.Contains(got, "[paused until") {
		t.Errorf("STATUS= %q does not say paused", got)
	}
	r.src.set(100, 0, nil) // depth 10: the policy wants 10
	r.tick(time.Second)
	r.wantActive(5, "paused")
	if v := r.pool.View(); v.Mode != "paused" || v.Override == nil || v.LastDecision == nil || v.LastDecision.HeldBy != "override" {
		t.Errorf("paused view: mode %q, override %+v, decision %+v", v.Mode, v.Override, v.LastDecision)
	}

	// A crash is still replaced while paused.
	r.sd.set("flexiq-work@3.service", "failed", "exit-code")
	r.tick(time.Second)
	r.tick(2 * time.Second) // past the slot's backoff
	r.wantActive(5, "paused, after a crash")
	if v := r.pool.View(); v.WorkerList[2].Restarts != 1 {
		t.Errorf("slot 3's restarts: %+v", v.WorkerList[2])
	}

	// The restart: the pause is read back from the override file.
	r.pool = r.overridePool(wall)
	r.start(r.pool)
	r.tick(time.Second)
	r.wantActive(5, "paused, after a restart")
	if r.pool.pub.Override().Kind != api.OverridePaused {
		t.Fatalf("override after restart: %+v", r.pool.pub.Override())
	}

	// The deadline passes while the daemon runs: the pool resumes by itself.
	wall.now = wall.now.Add(11 * time.Minute)
	r.tick(time.Second)
	r.wantActive(10, "after the pause expired")
	if len(r.lines("resumed scaling, was paused (its --for deadline")) != 1 {
		t.Errorf("no journal line for the expiry:\n%s", r.log)
	}
	if _, err := os.Stat(r.pool.override.Path()); !os.IsNotExist(err) {
		t.Errorf("override file left after the expiry: %v", err)
	}

	// A pin holds exactly N whatever the queue says, across a restart.
	if _, err := r.pool.SetOverride(api.Override{Kind: api.OverridePinned, Workers: 11}); !errors.Is(err, api.ErrOverride) {
		t.Errorf("pin above max_workers: %v", err)
	}
	if _, err := r.pool.SetOverride(api.Override{Kind: api.OverridePinned, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	r.tick(time.Second)
	r.wantActive(2, "pinned at 2")
	r.pool = r.overridePool(wall)
	r.start(r.pool)
	r.wantActive(2, "pinned at 2, after a restart")
	r.tick(time.Second)
	r.wantActive(2, "pinned at 2, after a restart and a tick")

	// A pin that expired while the daemon was down is gone at start.
	if _, err := r.pool.SetOverride(api.Override{Kind: api.OverridePinned, Workers: 3, Until: wall.now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	wall.now = wall.now.Add(2 * time.Minute)
	r.pool = r.overridePool(wall)
	r.start(r.pool)
	if o := r.pool.pub.Override(); o.Kind != api.OverrideNone {
		t.Errorf("expired pin restored: %+v", o)
	}
	r.tick(time.Second)
	r.wantActive(10, "after the pin expired during the restart")

	// The decisions are kept, in memory, newest last, with their steps.
	r.tick(time.Second)
	r.tick(time.Second)
	es := r.pool.Explain(3)
	if len(es) != 3 {
		t.Fatalf("explain 3: %d decisions", len(es))
	}
	var names []string
	for _, s := range es[2].Steps {
		names = append(names, s.Name)
	}
	for _, want := range []string{"source", "depth", "busy", "cpu", "latency", "bounds", "tolerance", "recommendation", "scale_up_window", "scale_down_window", "result"} {
		if !slices.Contains(names, want) {
			t.Errorf("step %s missing from %q", want, names)
		}
	}
}

func TestDryRunTouchesNoUnit(t *testing.T) {
	cfg := testPool("work")
	cfg.Mode = config.ModeDryRun
	wall := &wallClock{now: time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)}
	r := newRig(t, cfg)
	r.pool = r.overridePool(wall)
	r.start(r.pool)
	r.src.set(70, 0, nil)
	r.tick(time.Second)
	r.tick(time.Second)
	if len(r.sd.starts) != 0 || len(r.sd.stops) != 0 {
		t.Fatalf("dry-run started %q and stopped %q", r.sd.starts, r.sd.stops)
	}
	if got := r.lines("dry-run: would scale 0 → 7"); len(got) != 1 {
		t.Errorf("want one 'would scale 0 → 7' line:\n%s", r.log)
	}
	v := r.pool.View()
	if v.Mode != "dry-run" || !v.DryRun || v.Workers.Target != 7 || v.LastDecision.HeldBy != "dry-run" {
		t.Errorf("dry-run view: %+v, decision %+v", v, v.LastDecision)
	}
	// A reload to active acts at the next tick.
	active := *cfg
	active.Mode = config.ModeActive
	if err := r.pool.Update(&active); err != nil {
		t.Fatal(err)
	}
	r.tick(time.Second)
	r.wantActive(7, "after the reload to active")
}

// TestViewJSON pins the field names that scripts read.
func TestViewJSON(t *testing.T) {
	r := newRig(t, testPool("work"))
	r.pool = r.overridePool(&wallClock{now: time.Now()})
	r.start(r.pool)
	r.src.set(20, 1, nil)
	r.tick(time.Second)
	b, err := json.Marshal(r.pool.View())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"pool", "mode", "dry_run", "workers", "queue", "source", "last_decision", "worker_list", "updated_at"} {
		if _, ok := m[k]; !ok {
			t.Errorf("status JSON has no %q: %s", k, b)
		}
	}
	for obj, keys := range map[string][]string{
		"workers": {"live", "draining", "target", "min", "max"},
		"queue":   {"pending", "running", "paused", "oldest_age_sec"},
		"source":  {"type", "healthy", "last_success"},
	} {
		sub, _ := m[obj].(map[string]any)
		for _, k := range keys {
			if _, ok := sub[k]; !ok {
				t.Errorf("status JSON %s has no %q: %s", obj, k, b)
			}
		}
	}
	w := m["worker_list"].([]any)[0].(map[string]any)
	for _, k := range []string{"slot", "unit", "state", "uptime_sec", "cpu_percent", "memory_bytes", "restarts"} {
		if _, ok := w[k]; !ok {
			t.Errorf("worker JSON has no %q: %v", k, w)
		}
	}
}
