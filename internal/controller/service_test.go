package controller

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/probe"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// envPort is the FLEXIQ_PORT_HTTP a started unit got.
func (r *rig) envPort(unit string) int {
	r.t.Helper()
	r.sd.mu.Lock()
	defer r.sd.mu.Unlock()
	n, err := strconv.Atoi(r.sd.specs[unit].Environment["FLEXIQ_PORT_HTTP"])
	if err != nil {
		r.t.Fatalf("%s has no FLEXIQ_PORT_HTTP: %v", unit, err)
	}
	return n
}

func TestServicePorts(t *testing.T) {
	cases := []struct {
		name string
		base int
		want func(slot, port int) bool
	}{
		{"fixed: base + slot - 1", 8000, func(slot, port int) bool { return port == 8000+slot-1 }},
		{"auto: a free port", 0, func(slot, port int) bool { return port > 0 && port < 65536 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sr := newServiceRig(t, config.ReadyActive, tc.base)
			sr.src.set(30, 0, nil)
			sr.start(sr.pool)
			sr.tick(time.Second)
			sr.settle()
			seen := map[int]bool{}
			for slot := 1; slot <= 3; slot++ {
				unit := units.UnitName("web", slot)
				port := sr.envPort(unit)
				if !tc.want(slot, port) || seen[port] {
					t.Fatalf("slot %d got port %d (seen %v)", slot, port, seen)
				}
				seen[port] = true
				if got := sr.pool.workers.Slots.Live[slot].Ports()["http"]; got != port {
					t.Fatalf("slot %d remembers port %d, its unit has %d", slot, got, port)
				}
			}
			if got := sr.published(); len(got) != 3 {
				t.Fatalf("discovery lists %v, want the 3 active replicas", got)
			}
		})
	}
}

// A restart of the daemon reads the ports back from the units, re-picks
// none, starts nothing, and rewrites no discovery file.
func TestServiceRestartKeepsPortsAndDiscovery(t *testing.T) {
	for _, kind := range []string{config.ReadyActive, config.ReadyHTTP} {
		t.Run(kind, func(t *testing.T) {
			sr := newServiceRig(t, kind, 0)
			sr.src.set(20, 0, nil)
			sr.start(sr.pool)
			sr.tick(time.Second)
			if kind == config.ReadyHTTP {
				for slot := 1; slot <= 2; slot++ {
					sr.prober.send(t, units.UnitName("web", slot), probe.Ready, sr.clock.now)
				}
				sr.pump()
			}
			sr.settle()
			before := sr.published()
			if len(before) != 2 {
				t.Fatalf("discovery lists %v before the restart, want 2", before)
			}
			ports := map[string]int{}
			for _, u := range before {
				ports[u] = sr.envPort(u)
			}
			paths := []string{filepath.Join(sr.disc, "web.json"), filepath.Join(sr.disc, "web.file_sd.json"), filepath.Join(sr.disc, "upstream.conf")}
			stats := make([]os.FileInfo, len(paths))
			for i, p := range paths {
				if stats[i], _ = os.Stat(p); stats[i] == nil {
					t.Fatalf("%s not written", p)
				}
			}
			starts, runs := len(sr.sd.starts), sr.runner.runs()

			sr.prober = newFakeProber()
			sr.pool = sr.newPool()
			sr.start(sr.pool)
			sr.tick(time.Second)
			for i, p := range paths {
				if st, _ := os.Stat(p); st == nil || !os.SameFile(st, stats[i]) {
					t.Errorf("%s was rewritten by the restart", p)
				}
			}
			if len(sr.sd.starts) != starts || sr.runner.runs() != runs {
				t.Fatalf("the restart started %d units and ran %d commands", len(sr.sd.starts)-starts, sr.runner.runs()-runs)
			}
			for _, u := range before {
				w := sr.pool.workers.Slots.Live[sr.sd.units[u].Slot]
				if w.Ports()["http"] != ports[u] || !w.Ready() {
					t.Fatalf("%s adopted with ports %v, ready %v; want http=%d, ready", u, w.Ports(), w.Ready(), ports[u])
				}
				if kind == config.ReadyHTTP {
					if tg, ok := sr.prober.target(u); !ok || tg.Initial != probe.Ready {
						t.Fatalf("%s probed from %v, want Ready (the file listed it)", u, tg.Initial)
					}
				}
			}
		})
	}
}

// A probed replica enters discovery when ready, leaves it when it fails,
// and comes back.
func TestServiceReadinessInAndOutOfDiscovery(t *testing.T) {
	sr := newServiceRig(t, config.ReadyHTTP, 0)
	sr.src.set(20, 0, nil)
	sr.start(sr.pool)
	sr.tick(time.Second)
	u1, u2 := units.UnitName("web", 1), units.UnitName("web", 2)
	steps := []struct {
		unit string
		to   probe.State
		want []string
	}{
		{u2, probe.Ready, []string{u2}},
		{u1, probe.Ready, []string{u1, u2}},
		{u1, probe.NotReady, []string{u2}},
		{u1, probe.Ready, []string{u1, u2}},
	}
	if got := sr.published(); len(got) != 0 {
		t.Fatalf("discovery lists %v before any probe passed", got)
	}
	for i, st := range steps {
		sr.prober.send(t, st.unit, st.to, sr.clock.now)
		sr.pump()
		sr.settle()
		if got := sr.published(); !slices.Equal(got, st.want) {
			t.Fatalf("step %d (%s %s): discovery lists %v, want %v", i, st.unit, st.to, got, st.want)
		}
		ready, notReady := sr.pool.workers.Svc.ReadyCount()
		if ready+notReady != 2 || ready != len(st.want) {
			t.Fatalf("step %d: %d ready, %d not ready", i, ready, notReady)
		}
	}
	sr.tick(0)
	v := sr.pool.View()
	if v.Workers.Ready == nil || *v.Workers.Ready != 2 || *v.Workers.NotReady != 0 || v.WorkerList[0].Readiness != "ready" {
		t.Fatalf("status shows %+v", v.Workers)
	}
}

// systemd's own readiness: Type=notify replicas are not ready while
// activating.
func TestServiceNotifyReadiness(t *testing.T) {
	sr := newServiceRig(t, config.ReadyNotify, 0)
	sr.start(sr.pool)
	u := units.UnitName("web", 1)
	if !sr.sd.specs[u].NotifyReady {
		t.Fatal("the worker was not started with NotifyReady")
	}
	sr.tick(time.Second)
	if got := sr.published(); len(got) != 0 {
		t.Fatalf("discovery lists %v while the replica is activating", got)
	}
	if live := sr.pool.workers.Live(); live != 1 {
		t.Fatalf("%d live, want the activating replica counted", live)
	}
	sr.sd.set(u, "active", "success")
	sr.tick(time.Second)
	sr.settle()
	if got := sr.published(); !slices.Equal(got, []string{u}) {
		t.Fatalf("discovery lists %v once active, want %s", got, u)
	}
}

// A replica never ready within ready_timeout_sec, or unready for
// unready_timeout_sec, is stopped and replaced, and the journal says why.
func TestServiceReplacesUnreadyReplicas(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(sr *serviceRig, unit string)
		wait    time.Duration
		reason  string
		// drains: one that was in discovery leaves through a drain
		// period; one never ready is stopped at once.
		drains bool
	}{
		{"never ready", func(sr *serviceRig, unit string) {}, 5 * time.Minute, "never-ready", false},
		{"unready after ready", func(sr *serviceRig, unit string) {
			sr.prober.send(sr.t, unit, probe.Ready, sr.clock.now)
			sr.pump()
			sr.settle()
			sr.prober.send(sr.t, unit, probe.NotReady, sr.clock.now)
			sr.pump()
			sr.settle()
		}, time.Minute, "unready", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sr := newServiceRig(t, config.ReadyTCP, 0)
			sr.start(sr.pool)
			u := units.UnitName("web", 1)
			tc.prepare(sr, u)
			sr.tick(tc.wait - 2*time.Second)
			if len(sr.sd.stops) != 0 {
				t.Fatalf("stopped before the timeout: %v", sr.sd.stops)
			}
			sr.tick(2 * time.Second)
			if tc.drains {
				if len(sr.sd.stops) != 0 || sr.pool.workers.Draining() != 1 {
					t.Fatalf("stops %v, %d draining: want it draining", sr.sd.stops, sr.pool.workers.Draining())
				}
				sr.settle()
				sr.tick(31 * time.Second)
			}
			if !slices.Equal(sr.sd.stops, []string{u}) {
				t.Fatalf("stops %v, want %s", sr.sd.stops, u)
			}
			if len(sr.lines(`FLEXIQ_REASON="`+tc.reason+`"`, u, "stopping and replacing")) != 1 {
				t.Fatalf("no journal entry for the replacement:\n%s", sr.log)
			}
			if n := sr.pool.workers.Live(); n != 1 || sr.pool.workers.Slots.Live[2] == nil {
				t.Fatalf("%d live, want the replacement in slot 2", n)
			}
			if _, ok := sr.prober.target(u); ok {
				t.Fatal("the replaced replica is still probed")
			}
		})
	}
}

// The drain order: the replica leaves the discovery files, the
// after-change command runs on the files without it and finishes, and
// only then does its drain period begin; the stop comes after it.
func TestServiceDrainOrder(t *testing.T) {
	sr := newServiceRig(t, config.ReadyActive, 0)
	sr.src.set(20, 0, nil)
	sr.start(sr.pool)
	sr.tick(time.Second)
	sr.settle()
	u1, u2 := units.UnitName("web", 1), units.UnitName("web", 2)
	if got := sr.published(); len(got) != 2 {
		t.Fatalf("discovery lists %v, want 2", got)
	}
	sr.runner.mu.Lock()
	sr.runner.hold = make(chan struct{})
	sr.runner.mu.Unlock()

	before := sr.runner.runs()
	sr.src.set(0, 0, nil)
	sr.tick(time.Second) // scale-down to min_workers = 1
	if got := sr.published(); !slices.Equal(got, []string{u1}) {
		t.Fatalf("discovery lists %v after the scale-down, want %s alone", got, u1)
	}
	// The command saw the file without the replica; it still runs, and
	// the replica is draining, not stopped.
	deadline := time.Now().Add(5 * time.Second)
	for sr.runner.runs() == before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	sr.runner.mu.Lock()
	seen := sr.runner.seen[len(sr.runner.seen)-1]
	sr.runner.mu.Unlock()
	if slices.Contains(unitsIn(seen), u2) {
		t.Fatalf("the after-change command ran while the file still listed %s:\n%s", u2, seen)
	}
	if sr.pool.workers.Live() != 1 || sr.pool.workers.Draining() != 1 {
		t.Fatalf("%d live, %d draining; want 1 and 1", sr.pool.workers.Live(), sr.pool.workers.Draining())
	}
	sr.tick(time.Hour) // long after any drain period: the command holds it
	if len(sr.sd.stops) != 0 {
		t.Fatalf("stopped %v before the after-change command finished", sr.sd.stops)
	}
	close(sr.runner.hold)
	sr.settle()
	sr.tick(29 * time.Second)
	if len(sr.sd.stops) != 0 {
		t.Fatalf("stopped %v within the drain period", sr.sd.stops)
	}
	sr.tick(2 * time.Second)
	if !slices.Equal(sr.sd.stops, []string{u2}) {
		t.Fatalf("stops %v after the drain period, want %s", sr.sd.stops, u2)
	}
}

// A restart of the daemon in the middle of a replica's drain period
// neither puts it back into discovery nor stops it early.
func TestServiceRestartMidDrain(t *testing.T) {
	sr := newServiceRig(t, config.ReadyActive, 0)
	sr.src.set(20, 0, nil)
	sr.start(sr.pool)
	sr.tick(time.Second)
	sr.settle()
	sr.src.set(0, 0, nil)
	sr.tick(time.Second)
	sr.settle()
	sr.tick(10 * time.Second)
	u2 := units.UnitName("web", 2)

	sr.pool = sr.newPool()
	sr.start(sr.pool)
	sr.tick(time.Second)
	if got := sr.published(); slices.Contains(got, u2) {
		t.Fatalf("the restart put the draining %s back: %v", u2, got)
	}
	if len(sr.sd.stops) != 0 {
		t.Fatalf("stopped %v early", sr.sd.stops)
	}
	sr.tick(20 * time.Second)
	if !slices.Equal(sr.sd.stops, []string{u2}) {
		t.Fatalf("stops %v at the end of the drain period, want %s", sr.sd.stops, u2)
	}
}

// A replica that fails (its port taken, say) is a crash with backoff; its
// replacement gets its ports assigned again, and remembers those.
func TestServiceCrashReassignsPorts(t *testing.T) {
	sr := newServiceRig(t, config.ReadyActive, 0)
	sr.start(sr.pool)
	u := units.UnitName("web", 1)
	sr.settle()
	sr.sd.set(u, "failed", "exit-code")
	sr.tick(time.Second)
	if len(sr.lines("stopped without being asked", "FLEXIQ_BACKOFF_SEC")) == 0 {
		t.Fatalf("no crash with backoff:\n%s", sr.log)
	}
	if got := sr.published(); len(got) != 0 {
		t.Fatalf("discovery still lists %v after the crash", got)
	}
	sr.tick(2 * time.Second)
	if len(sr.sd.starts) != 2 {
		t.Fatalf("starts %v, want the replacement after the backoff", sr.sd.starts)
	}
	w := sr.pool.workers.Slots.Live[1]
	if w == nil || w.Ports()["http"] != sr.envPort(u) {
		t.Fatalf("the replacement remembers %v, its unit has http=%d", w, sr.envPort(u))
	}
}
