package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/replicas"
	"github.com/flexiq/flexiq-scaled/internal/controller/workers"
	"github.com/flexiq/flexiq-scaled/internal/discovery"
	"github.com/flexiq/flexiq-scaled/internal/portowner"
	"github.com/flexiq/flexiq-scaled/internal/probe"
)

// fakeProber records its targets; the test sends the transitions.
type fakeProber struct {
	mu      sync.Mutex
	targets map[string]probe.Target
	added   []probe.Target
	ch      chan probe.Transition
}

func newFakeProber() *fakeProber {
	return &fakeProber{targets: map[string]probe.Target{}, ch: make(chan probe.Transition, 64)}
}

func (f *fakeProber) Add(t probe.Target) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets[t.ID] = t
	f.added = append(f.added, t)
	return nil
}

func (f *fakeProber) Remove(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.targets[id]
	delete(f.targets, id)
	return ok
}

func (f *fakeProber) Transitions() <-chan probe.Transition { return f.ch }
func (f *fakeProber) Close()                               {}

// target is the probed target of unit, if any.
func (f *fakeProber) target(unit string) (probe.Target, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, t := range f.targets {
		if strings.HasPrefix(id, unit+"/") {
			return t, true
		}
	}
	return probe.Target{}, false
}

// send delivers a transition of unit's current target.
func (f *fakeProber) send(t *testing.T, unit string, to probe.State, at time.Time) {
	t.Helper()
	tg, ok := f.target(unit)
	if !ok {
		t.Fatalf("%s is not probed", unit)
	}
	tr := probe.Transition{ID: tg.ID, To: to, At: at}
	if to != probe.Ready {
		tr.NotReadySince, tr.Err = at, errors.New("connection refused")
	}
	f.ch <- tr
}

// fakeOwners is the host's listeners as a pool's port guard sees them: a
// cgroup tree of plain directories, whose inode numbers stand for cgroup
// ids (as in portowner's own tests), and the listeners a test declares.
// Nothing listens until a test says so.
type fakeOwners struct {
	t     *testing.T
	root  string
	mu    sync.Mutex
	ls    []portowner.Listener
	dumps int
}

func newFakeOwners(t *testing.T) *fakeOwners { return &fakeOwners{t: t, root: t.TempDir()} }

func (f *fakeOwners) dump() (*portowner.Table, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dumps++
	return portowner.NewTable(f.root, slices.Clone(f.ls)), nil
}

// listen adds a listener on port, created in cgroup (made if need be)
// by uid; pids are the cgroup's processes.
func (f *fakeOwners) listen(cgroup string, port int, uid uint32, pids ...int) {
	f.t.Helper()
	dir := filepath.Join(f.root, cgroup)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	var procs strings.Builder
	for _, p := range pids {
		fmt.Fprintln(&procs, p)
	}
	os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(procs.String()), 0o644)
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ls = append(f.ls, portowner.Listener{Port: port, Addr: netip.MustParseAddr("127.0.0.1"), UID: uid, Inode: uint64(1000 + len(f.ls)), CgroupID: st.Ino})
}

// replica makes unit listen on port, as its own listener.
func (f *fakeOwners) replica(unit string, port int) { f.listen("/flexiq.slice/"+unit, port, 998) }

// running makes unit's cgroup, as systemd does for a running unit.
func (f *fakeOwners) running(unit string) {
	if err := os.MkdirAll(filepath.Join(f.root, "/flexiq.slice/"+unit), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

// closePort ends every listener on port.
func (f *fakeOwners) closePort(port int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ls = slices.DeleteFunc(f.ls, func(l portowner.Listener) bool { return l.Port == port })
}

// fakeRunner runs after-change commands: it records each, with the
// discovery JSON file as it was when the command ran, and may hold them.
type fakeRunner struct {
	mu    sync.Mutex
	calls [][]string
	seen  []string
	file  string
	hold  chan struct{} // when set, a run waits until it is closed
	fail  error
}

func (f *fakeRunner) RunCommand(ctx context.Context, argv, env []string, stdout, stderr io.Writer) error {
	b, _ := os.ReadFile(f.file)
	f.mu.Lock()
	f.calls = append(f.calls, argv)
	f.seen = append(f.seen, string(b))
	hold, fail := f.hold, f.fail
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	io.WriteString(stdout, "reloaded\n")
	return fail
}

func (f *fakeRunner) runs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// serviceRig is a rig whose pool is a service: one auto port "http" (or
// a fixed one from base), readiness kind, an upstream template with an
// after-change command, its discovery in a directory of its own.
type serviceRig struct {
	*rig
	prober *fakeProber
	runner *fakeRunner
	owners *fakeOwners
	disc   string // the discovery directory
}

func newServiceRig(t *testing.T, kind string, base int) *serviceRig {
	t.Helper()
	disc := t.TempDir()
	src := filepath.Join(disc, "upstream.tmpl")
	os.WriteFile(src, []byte("{{range .Leaders}}server {{.HostPort \"http\"}};\n{{end}}"), 0o644)
	after, err := discovery.NewCommand("after", []string{"/usr/sbin/nginx", "-s", "reload"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := discovery.LoadTemplate("template[0]", discovery.TemplateSpec{Source: src, Destination: filepath.Join(disc, "upstream.conf"), After: &after})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testPool("web")
	cfg.ScaleDownWindow = 0
	cfg.Service = &config.Service{
		Ports:     []config.Port{{Name: "http", Base: base}},
		Readiness: config.Readiness{Kind: kind},
		Address:   "127.0.0.1", DiscoveryDir: disc, MetricsPort: "http",
		Templates:   []*discovery.Template{tmpl},
		DrainPeriod: 30 * time.Second, ReadyTimeout: 5 * time.Minute, UnreadyTimeout: time.Minute, GroupSize: 1,
	}
	if replicas.IsProbe(cfg.Service) {
		cfg.Service.Readiness.Probe = probe.Spec{Kind: probe.Kind(kind), Path: "/health", Port: "http", Command: []string{"/bin/true"}}.WithDefaults()
	}
	sr := &serviceRig{prober: newFakeProber(), runner: &fakeRunner{file: filepath.Join(disc, "web.json")}, owners: newFakeOwners(t), disc: disc}
	r := &rig{t: t, sd: newFakeSystemd(), src: &fakeSource{}, clock: &fakeClock{now: monoTime(1000 * time.Hour)}, log: &syncBuffer{}, cfg: cfg, dir: t.TempDir()}
	r.tweak = func(o *Options) {
		o.Commands = sr.runner
		o.NewProber = func(probe.Clock) workers.ReadinessProber { return sr.prober }
		o.PortOwners = sr.owners.dump
	}
	r.pool = r.newPool()
	sr.rig = r
	return sr
}

// published is the units the discovery JSON file lists, in its order.
func (sr *serviceRig) published() []string {
	sr.t.Helper()
	b, err := os.ReadFile(filepath.Join(sr.disc, "web.json"))
	if err != nil {
		sr.t.Fatalf("no discovery file: %v", err)
	}
	return unitsIn(string(b))
}

func unitsIn(file string) []string {
	var out []string
	for _, l := range strings.Split(file, "\n") {
		if _, v, ok := strings.Cut(l, `"unit": "`); ok {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(v), `",`))
		}
	}
	return out
}

// finishCommands waits for the after-change commands in flight and hands
// their end to the pool, as its loop would.
func (sr *serviceRig) finishCommands() {
	sr.t.Helper()
	ok := false
	sr.pool.do(func() {
		select {
		case d := <-sr.pool.workers.Svc.Pubs.Done():
			sr.pool.workers.Svc.CommandsFinished(context.Background(), sr.clock.now, d)
			ok = true
		case <-time.After(5 * time.Second):
		}
	})
	if !ok {
		sr.t.Fatal("the after-change commands did not finish")
	}
}

// pump takes the prober's transitions and publishes, as the loop does.
func (sr *serviceRig) pump() {
	sr.pool.do(func() {
		sr.pool.workers.Svc.PumpService(context.Background(), sr.clock.now)
		sr.pool.workers.Svc.PublishReady(context.Background(), sr.clock.now)
	})
}

// settle finishes after-change commands until none runs.
func (sr *serviceRig) settle() {
	sr.t.Helper()
	for range 10 {
		busy := false
		sr.pool.do(func() { busy = sr.pool.workers.Svc.Pubs.Busy })
		if !busy {
			return
		}
		sr.finishCommands()
	}
	sr.t.Fatal("after-change commands kept running")
}
