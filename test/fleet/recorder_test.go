package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// The recorder samples the fleet all through the run: every host's status
// (its pools' worker counts and fleet view) and its worker units as its
// cgroups show them, every hostPeriod; each pool's lease and plan in its
// store, every storePeriod. Every sample goes to a JSONL file, and the
// invariants that must hold at every moment are checked as the samples
// come: epochs never decrease, no host runs more workers than its
// capacity, no plan gives a host more than its capacity.
const (
	hostPeriod  = 500 * time.Millisecond
	storePeriod = 200 * time.Millisecond
)

// hostSample is one host's pool at one round.
type hostSample struct {
	// Live and Target are the status's worker counts; Units the pool's
	// worker units whose cgroup holds a process, counted from the host's
	// side (right even while the daemon is stopped, paused or cut off).
	Live   int `json:"live"`
	Target int `json:"target"`
	Units  int `json:"units"`
	// Pending is the backlog as the host's source last read it (-1: not
	// read yet).
	Pending int64          `json:"pending"`
	Fleet   *api.FleetView `json:"fleet,omitempty"`
	Err     string         `json:"err,omitempty"`
}

// round is one sampling of every host.
type round struct {
	At    time.Time
	Hosts map[string]map[string]hostSample // host name -> pool -> sample
}

// total is the pool's workers on every host, by their units.
func (r round) total(pool string) int {
	n := 0
	for _, ps := range r.Hosts {
		n += ps[pool].Units
	}
	return n
}

// stamped is a store sample with its time.
type stamped struct {
	At time.Time
	storeSample
}

type recorder struct {
	c     *cluster
	start time.Time
	out   *os.File
	path  string

	mu         sync.Mutex
	rounds     []round
	store      map[string][]stamped // pool -> samples
	violations []string
	// last values, for the monotonic checks
	lastEpoch map[string]uint64

	stop chan struct{}
	wg   sync.WaitGroup
	gone map[string]*atomic.Bool
}

// startRecorder starts the samplers; they stop when the test ends.
func startRecorder(t *testing.T, c *cluster) *recorder {
	t.Helper()
	dir := t.ArtifactDir()
	path := filepath.Join(dir, "fleet-samples.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("samples: %s (kept with go test -artifacts)", path)
	r := &recorder{c: c, start: time.Now(), out: f, path: path, store: map[string][]stamped{},
		lastEpoch: map[string]uint64{}, stop: make(chan struct{}), gone: map[string]*atomic.Bool{}}
	for _, h := range c.hosts {
		r.gone[h.name] = &atomic.Bool{}
	}
	r.wg.Add(1)
	go r.sampleHosts()
	for _, p := range pools {
		r.wg.Add(1)
		go r.sampleStore(p.name, p.store)
	}
	t.Cleanup(func() {
		close(r.stop)
		r.wg.Wait()
		f.Close()
	})
	return r
}

// markGone stops sampling a host (powered off).
func (r *recorder) markGone(h *host) { r.gone[h.name].Store(true) }

func (r *recorder) sampleHosts() {
	defer r.wg.Done()
	tick := time.NewTicker(hostPeriod)
	defer tick.Stop()
	for {
		at := time.Now()
		rd := round{At: at, Hosts: map[string]map[string]hostSample{}}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, h := range r.c.hosts {
			if r.gone[h.name].Load() {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := r.sampleHost(h)
				mu.Lock()
				rd.Hosts[h.name] = s
				mu.Unlock()
			}()
		}
		wg.Wait()
		r.add(rd)
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
	}
}

// sampleHost reads one host's status and units.
func (r *recorder) sampleHost(h *host) map[string]hostSample {
	out := map[string]hostSample{}
	resp, err := h.ctl.Status("")
	for _, p := range pools {
		s := hostSample{Units: countUnits(h, p.name), Pending: -1}
		if err != nil {
			s.Err = err.Error()
		}
		for _, v := range resp.Pools {
			if v.Pool == p.name {
				s.Live, s.Target, s.Fleet = v.Workers.Live, v.Workers.Target, v.Fleet
				if v.Queue != nil {
					s.Pending = v.Queue.Pending
				}
			}
		}
		out[p.name] = s
	}
	return out
}

// countUnits counts the pool's worker units that hold a process, from
// the sandbox's cgroup tree as the host sees it: the sandbox's systemd
// puts them in flexiq.slice/flexiq-POOL.slice.
func countUnits(h *host, pool string) int {
	dir := filepath.Join(h.sb.Cgroup, "flexiq.slice", "flexiq-"+pool+".slice")
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "flexiq-"+pool+"@") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "cgroup.events"))
		if err == nil && strings.Contains(string(b), "populated 1") {
			n++
		}
	}
	return n
}

func (r *recorder) sampleStore(pool, store string) {
	defer r.wg.Done()
	tick := time.NewTicker(storePeriod)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s := stamped{At: time.Now(), storeSample: r.c.stores.read(ctx, pool, store)}
		cancel()
		r.addStore(pool, s)
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
	}
}

func (r *recorder) secs(at time.Time) float64 { return at.Sub(r.start).Seconds() }

func (r *recorder) write(v any) {
	b, _ := json.Marshal(v)
	r.out.Write(append(b, '\n'))
}

// add records a round and checks the hosts' invariants.
func (r *recorder) add(rd round) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rounds = append(r.rounds, rd)
	for _, h := range r.c.hosts {
		for _, p := range pools {
			s, ok := rd.Hosts[h.name][p.name]
			if !ok {
				continue
			}
			r.write(struct {
				T    float64 `json:"t"`
				Host string  `json:"host"`
				Pool string  `json:"pool"`
				hostSample
			}{r.secs(rd.At), h.name, p.name, s})
			if s.Live > h.capacity || s.Units > h.capacity {
				r.violate(rd.At, "%s on %s: %d live, %d units, above its capacity %d", p.name, h.name, s.Live, s.Units, h.capacity)
			}
			if f := s.Fleet; f != nil {
				r.monotonic(rd.At, p.name+" plan_epoch on "+h.name, f.PlanEpoch)
				r.monotonic(rd.At, p.name+" epoch on "+h.name, f.Epoch)
			}
		}
	}
}

// addStore records a store sample and checks the store's invariants.
func (r *recorder) addStore(pool string, s stamped) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.store[pool] = append(r.store[pool], s)
	r.write(struct {
		T    float64 `json:"t"`
		Pool string  `json:"pool"`
		Kind string  `json:"kind"`
		storeSample
	}{r.secs(s.At), pool, "store", s.storeSample})
	if s.Err != "" {
		return
	}
	r.monotonic(s.At, pool+" store epoch counter", s.Counter)
	r.monotonic(s.At, pool+" store plan epoch", s.PlanEpoch)
	r.monotonic(s.At, pool+" store lease epoch", s.LeaseEpoch)
	for id, share := range s.Shares {
		if h := r.c.byID(id); h != nil && share > h.capacity {
			r.violate(s.At, "%s plan of epoch %d gives %s %d, above its capacity %d", pool, s.PlanEpoch, h.name, share, h.capacity)
		}
	}
}

// monotonic checks that a non-zero epoch never goes back (zero: not known
// yet, e.g. a daemon just restarted, or no lease held). One above
// fleet.MaxEpoch is a hostile writer's garbage, which the daemons take as
// absent: it is skipped, and what follows it is held to the last real one.
func (r *recorder) monotonic(at time.Time, what string, v uint64) {
	if v == 0 || v > fleet.MaxEpoch {
		return
	}
	if last := r.lastEpoch[what]; v < last {
		r.violate(at, "%s went back from %d to %d", what, last, v)
	}
	r.lastEpoch[what] = max(v, r.lastEpoch[what])
}

func (r *recorder) violate(at time.Time, format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf("t=%.1fs: ", r.secs(at))+fmt.Sprintf(format, args...))
}

// check fails t with the violations seen since the last check.
func (r *recorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	v := r.violations
	r.violations = nil
	r.mu.Unlock()
	for _, s := range v {
		t.Errorf("invariant broken: %s", s)
	}
}

// roundsSince returns the rounds taken at or after from.
func (r *recorder) roundsSince(from time.Time) []round {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []round
	for _, rd := range r.rounds {
		if !rd.At.Before(from) {
			out = append(out, rd)
		}
	}
	return out
}

// storeSince returns the pool's store samples taken at or after from.
func (r *recorder) storeSince(pool string, from time.Time) []stamped {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []stamped
	for _, s := range r.store[pool] {
		if !s.At.Before(from) {
			out = append(out, s)
		}
	}
	return out
}

// last returns the latest round and the pool's latest store sample.
func (r *recorder) last(pool string) (round, stamped) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var rd round
	var s stamped
	if n := len(r.rounds); n > 0 {
		rd = r.rounds[n-1]
	}
	if n := len(r.store[pool]); n > 0 {
		s = r.store[pool][n-1]
	}
	return rd, s
}
