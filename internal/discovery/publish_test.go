package discovery

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

var reload = &Command{Path: "/usr/bin/systemctl", Args: []string{"reload", "nginx"}, Timeout: 10 * time.Second}

// fixture is a publisher of pool web with the JSON and file_sd files, an
// nginx template and an env file, both reloading nginx.
type fixture struct {
	dir, out string
	tmpls    []*Template
	p        *Publisher
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	root := t.TempDir()
	out := filepath.Join(root, "etc")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	var tmpls []*Template
	for i, text := range []string{nginxTemplate, envTemplate} {
		src := writeTemplate(t, root, []string{"nginx.tmpl", "env.tmpl"}[i], text)
		dst := filepath.Join(out, []string{"upstream.conf", "backends.env"}[i])
		tm, err := LoadTemplate("k", TemplateSpec{Source: src, Destination: dst, After: reload})
		if err != nil {
			t.Fatal(err)
		}
		tmpls = append(tmpls, tm)
	}
	dir := filepath.Join(root, "run", "discovery") // Publish creates it
	p, err := NewPublisher(Options{Pool: "web", Dir: dir, MetricsPort: "metrics", Templates: tmpls})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{dir: dir, out: out, tmpls: tmpls, p: p}
}

func changedPaths(r Result) []string {
	out := []string{}
	for _, c := range r.Changed {
		out = append(out, filepath.Base(c.Path))
	}
	return out
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestPublishWritesOnlyWhatChanged(t *testing.T) {
	f := newFixture(t)
	full := twoReplicas()
	// Slot 2 changes its metrics port only: the JSON and file_sd files
	// change, the nginx and env files (http ports) do not.
	metricsMoved := NewSet("web", []Replica{full.Replicas[0], full.Replicas[1]})
	metricsMoved.Replicas[1].Ports = map[string]int{"http": 8002, "metrics": 9999}
	steps := []struct {
		name string
		set  Set
		want []string
	}{
		{"first publish writes all", full, []string{"web.json", "web.file_sd.json", "upstream.conf", "backends.env"}},
		{"same set writes nothing", twoReplicas(), []string{}},
		{"metrics port moved", metricsMoved, []string{"web.json", "web.file_sd.json"}},
		{"replica leaves", full.Without(2), []string{"web.json", "web.file_sd.json", "upstream.conf", "backends.env"}},
		{"empty", NewSet("web", nil), []string{"web.json", "web.file_sd.json", "upstream.conf", "backends.env"}},
		{"empty again", NewSet("web", nil), []string{}},
	}
	for _, st := range steps {
		before := map[string]uint64{}
		for _, p := range f.p.Paths() {
			if _, err := os.Stat(p); err == nil {
				before[filepath.Base(p)] = inode(t, p)
			}
		}
		res, err := f.p.Publish(st.set)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := changedPaths(res); !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: changed %v, want %v", st.name, got, st.want)
		}
		// A rewrite is a rename, a new inode; an untouched file keeps its.
		for _, p := range f.p.Paths() {
			b := filepath.Base(p)
			ino, had := before[b]
			rewritten := !had || inode(t, p) != ino
			if rewritten != contains(st.want, b) {
				t.Errorf("%s: %s rewritten=%v, reported=%v", st.name, b, rewritten, contains(st.want, b))
			}
		}
		// Every file on disk is what the renderers give for the set.
		want, _ := RenderJSON(st.set)
		if got, _ := os.ReadFile(filepath.Join(f.dir, "web.json")); string(got) != string(want) {
			t.Errorf("%s: web.json holds\n%s\nwant\n%s", st.name, got, want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestPublishCommandsOncePerChange(t *testing.T) {
	f := newFixture(t)
	res, err := f.p.Publish(twoReplicas())
	if err != nil {
		t.Fatal(err)
	}
	// Two templates name the same reload: it runs once.
	if got := res.Commands(); len(got) != 1 || !got[0].equal(*reload) {
		t.Errorf("commands %+v, want one nginx reload", got)
	}
	// The daemon's own files carry no command.
	for _, c := range res.Changed {
		isTemplate := strings.HasPrefix(c.Path, f.out)
		if (c.After != nil) != isTemplate {
			t.Errorf("%s: after-change %v", c.Path, c.After)
		}
	}
	res, _ = f.p.Publish(twoReplicas())
	if len(res.Commands()) != 0 {
		t.Errorf("unchanged set gives commands %+v", res.Commands())
	}
}

func TestPublishRetryAfterFailedCommand(t *testing.T) {
	f := newFixture(t)
	f.p.Publish(twoReplicas())
	upstream := filepath.Join(f.out, "upstream.conf")
	ino := inode(t, upstream)
	f.p.Retry(upstream)
	res, err := f.p.Publish(twoReplicas())
	if err != nil {
		t.Fatal(err)
	}
	if got := changedPaths(res); !reflect.DeepEqual(got, []string{"upstream.conf"}) {
		t.Errorf("after Retry: changed %v, want upstream.conf alone", got)
	}
	if inode(t, upstream) != ino {
		t.Error("Retry rewrote an unchanged file")
	}
	if res, _ = f.p.Publish(twoReplicas()); len(res.Changed) != 0 {
		t.Errorf("Retry reported twice: %v", changedPaths(res))
	}
}

func TestPublishAfterRestartReadsDisk(t *testing.T) {
	f := newFixture(t)
	f.p.Publish(twoReplicas())
	// A new publisher (a daemon restart) over the same files.
	p2, err := NewPublisher(Options{Pool: "web", Dir: f.dir, MetricsPort: "metrics", Templates: f.tmpls})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p2.Publish(twoReplicas())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) != 0 {
		t.Errorf("restart with the same set changed %v", changedPaths(res))
	}
	res, _ = p2.Publish(twoReplicas().Without(1))
	if len(res.Changed) != 4 {
		t.Errorf("restart then a change: changed %v, want all four", changedPaths(res))
	}
}

func TestNewPublisherRefuses(t *testing.T) {
	tm := &Template{Spec: TemplateSpec{Destination: "/d/web.json"}}
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"empty pool", Options{Pool: "", Dir: "/d"}, "cannot name a file"},
		{"slash in pool", Options{Pool: "a/b", Dir: "/d"}, "cannot name a file"},
		{"dot pool", Options{Pool: "..", Dir: "/d"}, "cannot name a file"},
		{"template over the JSON file", Options{Pool: "web", Dir: "/d", Templates: []*Template{tm}}, "writes /d/web.json twice"},
	}
	for _, tt := range tests {
		if _, err := NewPublisher(tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
	p, err := NewPublisher(Options{Pool: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Paths(); !reflect.DeepEqual(got, []string{DefaultDir + "/web.json"}) {
		t.Errorf("default paths %v (no metrics port: no file_sd file)", got)
	}
	if _, err := p.Publish(NewSet("other", nil)); err == nil {
		t.Error("publisher of web took pool other's set")
	}
}

func TestPublishBrokenTemplateKeepsOthers(t *testing.T) {
	f := newFixture(t)
	f.p.Publish(twoReplicas())
	// A replica without the http port makes both templates fail.
	s := twoReplicas()
	s.Replicas[1].Ports = map[string]int{"metrics": 9002}
	upstream := filepath.Join(f.out, "upstream.conf")
	before, _ := os.ReadFile(upstream)
	res, err := f.p.Publish(s)
	if err == nil || !strings.Contains(err.Error(), "nginx.tmpl:3:") {
		t.Errorf("error %v, want one naming nginx.tmpl line 3", err)
	}
	if got := changedPaths(res); !reflect.DeepEqual(got, []string{"web.json"}) {
		t.Errorf("changed %v, want web.json alone", got)
	}
	if after, _ := os.ReadFile(upstream); string(after) != string(before) {
		t.Error("a failed rendering replaced the old file")
	}
	entries, _ := os.ReadDir(f.out)
	if len(entries) != 2 {
		t.Errorf("%d entries in the template directory, want the two files and no temporary", len(entries))
	}
}

func TestPublishModes(t *testing.T) {
	f := newFixture(t)
	f.p.Publish(twoReplicas())
	for _, p := range f.p.Paths() {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644 for a proxy or Prometheus to read", p, fi.Mode().Perm())
		}
	}
}

func TestPublishSeesPortsMapChangedInPlace(t *testing.T) {
	f := newFixture(t)
	s := twoReplicas()
	f.p.Publish(s)
	// The caller reuses its maps: the publisher must not hold them.
	s.Replicas[0].Ports["http"] = 7001
	res, err := f.p.Publish(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := changedPaths(res); !reflect.DeepEqual(got, []string{"web.json", "upstream.conf", "backends.env"}) {
		t.Errorf("changed %v after an http port moved", got)
	}
}

func TestPublishSortsAnUnsortedSet(t *testing.T) {
	f := newFixture(t)
	f.p.Publish(twoReplicas())
	s := twoReplicas()
	s.Replicas[0], s.Replicas[1] = s.Replicas[1], s.Replicas[0]
	res, err := f.p.Publish(s)
	if err != nil || len(res.Changed) != 0 {
		t.Errorf("the same replicas in another order changed %v (error %v)", changedPaths(res), err)
	}
}

func TestRetryOfAnUnknownPathIsIgnored(t *testing.T) {
	f := newFixture(t)
	f.p.Publish(twoReplicas())
	f.p.Retry("/not/ours")
	if len(f.p.retry) != 0 {
		t.Errorf("pending retries %v", f.p.retry)
	}
}

// The daemon runs with UMask=0077; the directory it creates must still let
// Prometheus, another user, in.
func TestMakeDirIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "a", "discovery")
	if err := makeDir(dir); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", st.Mode().Perm())
	}
}
