package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/discovery"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// wakeRig is a service pool idling at zero with a wake address (issue 29),
// its upstream template pointing at the wake address while empty.
func wakeRig(t *testing.T) *serviceRig {
	sr := newServiceRig(t, config.ReadyActive, 0)
	src := filepath.Join(sr.disc, "wake-upstream.tmpl")
	if err := os.WriteFile(src, []byte("{{range .Leaders}}server {{.HostPort \"http\"}};\n{{else}}server {{.Wake}};\n{{end}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	tm, err := discovery.LoadTemplate("template[0]", discovery.TemplateSpec{Source: src, Destination: filepath.Join(sr.disc, "upstream.conf"),
		Mode: 0o644, After: sr.cfg.Service.Templates[0].Spec.After})
	if err != nil {
		t.Fatal(err)
	}
	sr.cfg.Service.Templates = []*discovery.Template{tm}
	sr.cfg.MinWorkers = 0
	sr.cfg.ScaleDownWindow = 0
	sr.cfg.Service.Wake = config.Wake{Listen: "127.0.0.1:18080", Port: "http", Mode: config.WakeHold, HoldTimeout: 10 * time.Second}
	sr.pool = sr.newPool()
	sr.src.set(0, 0, nil)
	sr.start(sr.pool)
	sr.tick(time.Second)
	sr.settle()
	return sr
}

// A wake request scales the pool from 0 to 1 at the tick it causes,
// explain names it, the ready replica's address reaches a long poll, and
// once the hold is over the policy takes the pool back to zero.
func TestWakeScalesFromZeroAndBack(t *testing.T) {
	sr := wakeRig(t)
	p := sr.pool
	if n := p.workers.Live(); n != 0 {
		t.Fatalf("%d live before the wake, want 0", n)
	}
	r0, err := p.ColdWake().Ready(context.Background(), 0, 0)
	if err != nil || len(r0.Addrs) != 0 || r0.Generation == 0 {
		t.Fatalf("ready before the wake: %+v, %v", r0, err)
	}
	// A long poll waits for the replica.
	polled := make(chan api.WakeReady, 1)
	go func() {
		r, _ := p.ColdWake().Ready(context.Background(), r0.Generation, 5*time.Second)
		polled <- r
	}()
	resp, err := p.ColdWake().Request(api.WakeRequest{Wake: true, WakeStats: api.WakeStats{Held: 1}})
	if err != nil || !resp.Woken {
		t.Fatalf("Wake: %+v, %v", resp, err)
	}
	select {
	case <-p.wake:
	default:
		t.Fatal("the wake did not kick the loop")
	}
	sr.tick(100 * time.Millisecond)
	sr.settle()
	if n := p.workers.Live(); n != 1 {
		t.Fatalf("%d live after the wake's tick, want 1", n)
	}
	e := p.Explain(1)
	if len(e) != 1 || !strings.Contains(e[0].Rationale, "woken by its wake address 127.0.0.1:18080") ||
		!containsStep(e[0], "wake") {
		t.Errorf("explain does not name the wake: %+v", e)
	}
	select {
	case r := <-polled:
		if len(r.Addrs) != 1 || !strings.HasPrefix(r.Addrs[0], "127.0.0.1:") || r.Generation == r0.Generation {
			t.Errorf("long poll answered %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long poll did not see the ready replica")
	}
	if v := p.ColdWake().View(); v == nil || !v.Holding || v.Requests != 1 || v.Held != 1 {
		t.Errorf("WakeView %+v", v)
	}
	// Within the hold, the policy's 0 is held at 1.
	sr.tick(5 * time.Second)
	if n := p.workers.Live(); n != 1 {
		t.Errorf("%d live within the hold, want 1", n)
	}
	// Past it, back to zero.
	sr.tick(6 * time.Second)
	if d := p.Explain(1)[0]; d.Desired != 0 {
		t.Errorf("after the hold the decision is %s %d -> %d, want 0", d.Action, d.Current, d.Desired)
	}
}

func containsStep(e api.Explanation, name string) bool {
	for _, s := range e.Steps {
		if s.Name == name {
			return true
		}
	}
	return false
}

// A pool without a wake address refuses a wake; a paused pool is not
// woken (the operator's override has the last word).
func TestWakeRefusedOrOverridden(t *testing.T) {
	sr := newServiceRig(t, config.ReadyActive, 0)
	if _, err := sr.pool.ColdWake().Request(api.WakeRequest{Wake: true}); !errors.Is(err, ErrNoWake) {
		t.Errorf("a pool without a wake address: %v, want ErrNoWake", err)
	}
	w := wakeRig(t)
	if _, err := w.pool.SetOverride(api.Override{Kind: api.OverridePaused}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.pool.ColdWake().Request(api.WakeRequest{Wake: true}); err != nil {
		t.Fatal(err)
	}
	w.tick(100 * time.Millisecond)
	if n := w.pool.workers.Live(); n != 0 {
		t.Errorf("a paused pool woken to %d", n)
	}
}

// The brief's order on the way back to zero: the publish that takes the
// last ready replica out renders the template's empty branch, the wake
// address, and its after-change command (nginx's reload) finishes, before
// that replica is stopped: no request finds an empty upstream.
func TestWakeBranchBeforeLastReplicaStops(t *testing.T) {
	sr := wakeRig(t)
	upstream := func() string {
		b, err := os.ReadFile(filepath.Join(sr.disc, "upstream.conf"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := upstream(); got != "server 127.0.0.1:18080;\n" {
		t.Fatalf("at zero the upstream is %q, want the wake address", got)
	}
	if _, err := sr.pool.ColdWake().Request(api.WakeRequest{Wake: true}); err != nil {
		t.Fatal(err)
	}
	sr.tick(100 * time.Millisecond)
	sr.settle()
	if got := upstream(); strings.Contains(got, "18080") {
		t.Fatalf("with a ready replica the upstream is %q, still the wake address", got)
	}
	sr.runner.mu.Lock()
	sr.runner.hold = make(chan struct{})
	sr.runner.mu.Unlock()
	sr.tick(11 * time.Second) // past the hold: the policy's 0
	if got := upstream(); got != "server 127.0.0.1:18080;\n" {
		t.Fatalf("the last replica leaving, the upstream is %q, want the wake address", got)
	}
	sr.tick(time.Hour) // the command (nginx's reload) still runs
	if len(sr.sd.stops) != 0 {
		t.Fatalf("stopped %v before the reload onto the wake address finished", sr.sd.stops)
	}
	close(sr.runner.hold)
	sr.settle()
	sr.tick(31 * time.Second) // the drain period
	if u := units.UnitName("web", 1); !slices.Equal(sr.sd.stops, []string{u}) {
		t.Fatalf("stops %v after the drain period, want %s", sr.sd.stops, u)
	}
}
