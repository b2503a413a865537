package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/discovery"
	"github.com/flexiq/flexiq-scaled/internal/probe"
	"github.com/flexiq/flexiq-scaled/test/testfile"
)

// withTestdata replaces TESTDATA in text by the absolute path of
// testdata/service: template sources must be absolute.
func withTestdata(t *testing.T, text string) string {
	t.Helper()
	dir, err := filepath.Abs("testdata/service")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(text, "TESTDATA", dir)
}

// servicePool is an nginx-style service pool: two ports, an HTTP probe, a
// template that reloads nginx, a metrics port.
const servicePool = `[pools.web]
exec = ["/usr/local/bin/web", "--port=${FLEXIQ_PORT_HTTP}"]
min_workers = 1
max_workers = 6
[pools.web.source]
path = "/var/lib/flexiq/web.db"
[pools.web.service]
address = "10.0.0.5"
metrics_port = "metrics"
discovery_dir = "/run/flexiq-scaled/web/"
drain_period_sec = 20
ready_timeout_sec = 120.5
unready_timeout_sec = 45
[pools.web.service.ports]
http = 8001
metrics = "auto"
[pools.web.service.readiness]
type = "http"
path = "/health"
port = "http"
period_sec = 2
timeout_sec = 0.5
failure_threshold = 2
[[pools.web.service.template]]
source = "TESTDATA/upstream.tmpl"
destination = "/etc/nginx/conf.d/web-upstream.conf"
mode = "0640"
after_change = ["/usr/bin/systemctl", "reload", "nginx"]
after_change_timeout_sec = 10
`

func TestServiceExample(t *testing.T) {
	c, err := load(t, withTestdata(t, servicePool))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pools["web"]
	if !p.IsService() || p.GroupSize() != 1 {
		t.Fatalf("IsService %v, GroupSize %d", p.IsService(), p.GroupSize())
	}
	s := p.Service
	wantProbe := probe.Spec{Kind: probe.KindHTTP, Path: "/health", Port: "http", Period: 2 * time.Second,
		Timeout: 500 * time.Millisecond, SuccessThreshold: 1, FailureThreshold: 2}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"ports", s.Ports, []Port{{Name: "http", Base: 8001}, {Name: "metrics"}}},
		{"address", s.Address, "10.0.0.5"},
		{"metrics_port", s.MetricsPort, "metrics"},
		{"discovery_dir", s.DiscoveryDir, "/run/flexiq-scaled/web"},
		{"drain_period", s.DrainPeriod, 20 * time.Second},
		{"ready_timeout", s.ReadyTimeout, 120500 * time.Millisecond},
		{"unready_timeout", s.UnreadyTimeout, 45 * time.Second},
		{"readiness", s.Readiness, Readiness{Kind: ReadyHTTP, Probe: wantProbe}},
		{"templates", len(s.Templates), 1},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %+v, want %+v", c.what, c.got, c.want)
		}
	}
	tm := s.Templates[0]
	wantAfter := &discovery.Command{Path: "/usr/bin/systemctl", Args: []string{"reload", "nginx"}, Timeout: 10 * time.Second}
	if tm.Spec.Mode != 0o640 || tm.Spec.Destination != "/etc/nginx/conf.d/web-upstream.conf" || !reflect.DeepEqual(tm.Spec.After, wantAfter) {
		t.Errorf("template spec %+v, after %+v", tm.Spec, tm.Spec.After)
	}
	out, err := tm.Render(discovery.NewSet("web", []discovery.Replica{{Slot: 1, Address: "10.0.0.5", Ports: map[string]int{"http": 8001}}}))
	if err != nil || !strings.Contains(string(out), "server 10.0.0.5:8001;") {
		t.Errorf("rendered %q, %v", out, err)
	}
	if first, last := s.Ports[0].FixedRange(p.MaxWorkers, s.GroupSize); first != 8001 || last != 8006 {
		t.Errorf("fixed range %d-%d, want 8001-8006", first, last)
	}
}

func TestServiceDefaults(t *testing.T) {
	c, err := load(t, pool("")+"[pools.email.service]\n")
	if err != nil {
		t.Fatal(err)
	}
	want := &Service{Readiness: Readiness{Kind: ReadyActive}, Address: DefaultServiceAddress, DiscoveryDir: discovery.DefaultDir,
		DrainPeriod: DefaultDrainPeriod, ReadyTimeout: DefaultReadyTimeout, UnreadyTimeout: DefaultUnreadyTimeout, GroupSize: 1}
	if got := c.Pools["email"].Service; !reflect.DeepEqual(got, want) {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	c, err = load(t, pool(""))
	if err != nil || c.Pools["email"].IsService() {
		t.Errorf("a pool without [service] is a service pool (%v)", err)
	}
}

// svc is the email pool with body after its tables.
func svc(body string) string { return pool("") + body }

const webPorts = "[pools.email.service.ports]\nhttp = \"auto\"\n"

func TestServiceProblems(t *testing.T) {
	tmpl := func(extra string) string {
		return svc(webPorts + "[[pools.email.service.template]]\ndestination = \"/etc/nginx/conf.d/up.conf\"\n" + extra)
	}
	for _, tc := range []struct {
		name, text, key, msg string
	}{
		{"service not a table", pool("service = 3"), "pools.email.service", "must be a table"},
		{"unknown key", svc("[pools.email.service]\nadress = \"::1\"\n"), "pools.email.service.adress", "unknown key"},
		{"address not an IP", svc("[pools.email.service]\naddress = \"localhost\"\n"), "pools.email.service.address", "not an IP address"},
		{"address with a zone", svc("[pools.email.service]\naddress = \"fe80::1%eth0\"\n"), "pools.email.service.address", "without a zone"},
		{"address unspecified", svc("[pools.email.service]\naddress = \"0.0.0.0\"\n"), "pools.email.service.address", "cannot be connected to"},
		{"metrics_port undeclared", svc("[pools.email.service]\nmetrics_port = \"metrics\"\n" + webPorts), "pools.email.service.metrics_port", `"metrics" is not declared`},
		{"discovery_dir relative", svc("[pools.email.service]\ndiscovery_dir = \"run/d\"\n"), "pools.email.service.discovery_dir", "absolute path"},
		{"discovery_dir hidden", svc("[pools.email.service]\ndiscovery_dir = \"/tmp/d\"\n"), "pools.email.service.discovery_dir", "PrivateTmp"},
		{"drain_period_sec negative", svc("[pools.email.service]\ndrain_period_sec = -1\n"), "pools.email.service.drain_period_sec", "must be >= 0"},
		{"ready_timeout_sec zero", svc("[pools.email.service]\nready_timeout_sec = 0\n"), "pools.email.service.ready_timeout_sec", "must be > 0"},
		{"unready_timeout_sec zero", svc("[pools.email.service]\nunready_timeout_sec = 0\n"), "pools.email.service.unready_timeout_sec", "must be > 0"},
		{"group_size zero", svc("[pools.email.service]\ngroup_size = 0\n"), "pools.email.service.group_size", "must be >= 1"},
		{"cpuset_split without a group", svc("[pools.email.service]\ncpuset_split = true\n"), "pools.email.service.cpuset_split", "needs group_size >= 2"},
		{"cpuset_split not a boolean", svc("[pools.email.service]\ncpuset_split = \"yes\"\n"), "pools.email.service.cpuset_split", "must be a boolean"},
		{"env FLEXIQ_PORT_", pool("environment = { FLEXIQ_PORT_HTTP = \"1\" }\n[pools.email.service]\n"), "pools.email.environment.FLEXIQ_PORT_HTTP", "reserved in a service pool"},
		{"env FLEXIQ_RANK", pool("environment = { FLEXIQ_RANK = \"1\" }\n[pools.email.service]\n"), "pools.email.environment.FLEXIQ_RANK", "reserved in a service pool"},
		{"env FLEXIQ_GROUP_SIZE", pool("environment = { FLEXIQ_GROUP_SIZE = \"1\" }\n[pools.email.service]\n"), "pools.email.environment.FLEXIQ_GROUP_SIZE", "reserved"},
		{"env FLEXIQ_PEERS_", pool("environment = { FLEXIQ_PEERS_HTTP = \"1\" }\n[pools.email.service]\n"), "pools.email.environment.FLEXIQ_PEERS_HTTP", "reserved"},
		{"group_size above max_total_workers", "[capacity]\nmax_total_workers = 4\n" + svc("[pools.email.service]\ngroup_size = 5\n"), "pools.email.service.group_size", "a group of 5 ranks is 5 workers, and [capacity] max_total_workers = 4"},
		{"min_workers groups above max_total_workers", "[capacity]\nmax_total_workers = 5\n" + pool("min_workers = 2\n[pools.email.service]\ngroup_size = 3\n"), "pools.email.service.group_size", "min_workers = 2 groups of 3 ranks are 6 workers"},

		// Ports.
		{"port name", svc("[pools.email.service.ports]\nHTTP = 8000\n"), "pools.email.service.ports.HTTP", "must match [a-z][a-z0-9_]{0,31}"},
		{"port word", svc("[pools.email.service.ports]\nhttp = \"any\"\n"), "pools.email.service.ports.http", `must be "auto" or a base port number`},
		{"port zero", svc("[pools.email.service.ports]\nhttp = 0\n"), "pools.email.service.ports.http", "0 is not a port number"},
		{"port too large", svc("[pools.email.service.ports]\nhttp = 65536\n"), "pools.email.service.ports.http", "65536 is not a port number"},
		{"port a float", svc("[pools.email.service.ports]\nhttp = 80.5\n"), "pools.email.service.ports.http", "not a float"},
		{"fixed range past 65535", svc("[pools.email.service.ports]\nhttp = 65530\n"), "pools.email.service.ports.http", "the fixed range 65530-65539"},
		{"overlap in a pool", svc("[pools.email.service]\ngroup_size = 2\n[pools.email.service.ports]\nhttp = 8000\nmetrics = 8019\n"),
			"pools.email.service.ports.metrics", "the fixed range 8019-8038 overlaps pools.email.service.ports.http's 8000-8019"},
		{"overlap across pools", svc("[pools.email.service.ports]\nhttp = 8000\n") + "[pools.web]\nexec = [\"/bin/web\"]\n[pools.web.source]\npath = \"/var/lib/w.db\"\n[pools.web.service.ports]\nweb = 8009\n",
			"pools.web.service.ports.web", "the fixed range 8009-8018 overlaps pools.email.service.ports.http's 8000-8009"},

		// Readiness.
		{"readiness type", svc("[pools.email.service.readiness]\ntype = \"grpc\"\n"), "pools.email.service.readiness.type", `unknown readiness type "grpc"`},
		{"readiness key of another type", svc(webPorts + "[pools.email.service.readiness]\ntype = \"tcp\"\nport = \"http\"\npath = \"/\"\n"), "pools.email.service.readiness.path", `does not apply to type = "tcp"`},
		{"probe key on active", svc("[pools.email.service.readiness]\nperiod_sec = 5\n"), "pools.email.service.readiness.period_sec", `does not apply to type = "active"`},
		{"unknown readiness key", svc("[pools.email.service.readiness]\ntype = \"tcp\"\nprot = \"http\"\n"), "pools.email.service.readiness.prot", "unknown key"},
		{"probe port undeclared", svc(webPorts + "[pools.email.service.readiness]\ntype = \"http\"\nport = \"admin\"\n"), "pools.email.service.readiness.port", `"admin": not declared`},
		{"probe port missing", svc(webPorts + "[pools.email.service.readiness]\ntype = \"tcp\"\n"), "pools.email.service.readiness.port", "missing"},
		{"probe path", svc(webPorts + "[pools.email.service.readiness]\ntype = \"http\"\nport = \"http\"\npath = \"health\"\n"), "pools.email.service.readiness.path", `must start with "/"`},
		{"probe command relative", svc("[pools.email.service.readiness]\ntype = \"command\"\ncommand = [\"check\"]\n"), "pools.email.service.readiness.command", "absolute path"},
		{"probe command missing", svc("[pools.email.service.readiness]\ntype = \"command\"\n"), "pools.email.service.readiness.command", "missing"},
		{"probe period zero", svc(webPorts + "[pools.email.service.readiness]\ntype = \"tcp\"\nport = \"http\"\nperiod_sec = 0\n"), "pools.email.service.readiness.period_sec", "must be > 0"},
		{"probe timeout above period", svc(webPorts + "[pools.email.service.readiness]\ntype = \"tcp\"\nport = \"http\"\nperiod_sec = 2\ntimeout_sec = 3\n"), "pools.email.service.readiness.timeout_sec", "must not be longer than period_sec"},
		{"probe threshold zero", svc(webPorts + "[pools.email.service.readiness]\ntype = \"tcp\"\nport = \"http\"\nsuccess_threshold = 0\n"), "pools.email.service.readiness.success_threshold", "must be >= 1"},

		// Templates.
		{"template does not parse", tmpl("source = \"TESTDATA/bad_parse.tmpl\"\n"), "pools.email.service.template[0].source", "template does not parse: TESTDATA/bad_parse.tmpl:3: "},
		{"template names an undeclared port", tmpl("source = \"TESTDATA/undeclared_port.tmpl\"\n"), "pools.email.service.template[0].source", `TESTDATA/undeclared_port.tmpl:3: `},
		{"template source missing", tmpl(""), "pools.email.service.template[0].source", "missing"},
		{"template source not there", tmpl("source = \"TESTDATA/none.tmpl\"\n"), "pools.email.service.template[0].source", "no such file"},
		{"template source hidden", tmpl("source = \"/home/x/up.tmpl\"\n"), "pools.email.service.template[0].source", "ProtectHome"},
		{"template destination relative", svc("[[pools.email.service.template]]\nsource = \"TESTDATA/plain.tmpl\"\ndestination = \"up.conf\"\n"), "pools.email.service.template[0].destination", "absolute path"},
		{"template destination twice", tmpl("source = \"TESTDATA/plain.tmpl\"\n[[pools.email.service.template]]\nsource = \"TESTDATA/plain.tmpl\"\ndestination = \"/etc/nginx/conf.d/up.conf\"\n"), "pools.email.service.template[1].destination", "also pools.email.service.template[0]'s destination"},
		{"template mode word", tmpl("source = \"TESTDATA/plain.tmpl\"\nmode = \"rw\"\n"), "pools.email.service.template[0].mode", "not a file mode"},
		{"template mode integer", tmpl("source = \"TESTDATA/plain.tmpl\"\nmode = 644\n"), "pools.email.service.template[0].mode", "must be a string"},
		{"template mode setuid", tmpl("source = \"TESTDATA/plain.tmpl\"\nmode = \"4755\"\n"), "pools.email.service.template[0].mode", "not a file mode"},
		{"after_change relative", tmpl("source = \"TESTDATA/plain.tmpl\"\nafter_change = [\"systemctl\", \"reload\", \"nginx\"]\n"), "pools.email.service.template[0].after_change", `"systemctl" is not an absolute path`},
		{"after_change empty", tmpl("source = \"TESTDATA/plain.tmpl\"\nafter_change = []\n"), "pools.email.service.template[0].after_change", "empty command"},
		{"after_change timeout alone", tmpl("source = \"TESTDATA/plain.tmpl\"\nafter_change_timeout_sec = 5\n"), "pools.email.service.template[0].after_change_timeout_sec", "only with after_change"},
		{"template unknown key", tmpl("source = \"TESTDATA/plain.tmpl\"\nreload = [\"/bin/true\"]\n"), "pools.email.service.template[0].reload", "unknown key"},
		{"template not an array", svc("[pools.email.service]\ntemplate = \"/x.tmpl\"\n"), "pools.email.service.template", "an array of tables"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, withTestdata(t, tc.text), tc.key, withTestdata(t, tc.msg))
		})
	}
}

// Overlapping pools in two files: the problem names the other file.
func TestServicePortOverlapAcrossFiles(t *testing.T) {
	path := writeConfig(t, svc("[pools.email.service.ports]\nhttp = 8000\n"))
	if err := os.MkdirAll(DropInDir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	dropIn := filepath.Join(DropInDir(path), "web.toml")
	text := "[pools.web]\nexec = [\"/bin/web\"]\n[pools.web.source]\npath = \"/var/lib/w.db\"\n[pools.web.service.ports]\nweb = 8005\n"
	if err := os.WriteFile(dropIn, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	want := dropIn + ": pools.web.service.ports.web: the fixed range 8005-8014 overlaps pools.email.service.ports.http (in " + path + ")"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
}

// withoutTemplates is c with the templates taken out, and them as their
// specs and text: a parsed template holds functions, which DeepEqual never
// finds equal.
func withoutTemplates(c *Config) (*Config, map[string][]string) {
	cc := *c
	cc.Pools = map[string]*Pool{}
	texts := map[string][]string{}
	for name, p := range c.Pools {
		pp := *p
		if p.Service != nil {
			s := *p.Service
			for _, t := range s.Templates {
				after := "none"
				if t.Spec.After != nil {
					after = fmt.Sprintf("%+v", *t.Spec.After)
				}
				texts[name] = append(texts[name], fmt.Sprintf("%s %s %o %s %q", t.Spec.Source, t.Spec.Destination, t.Spec.Mode, after, t.Text()))
			}
			s.Templates = nil
			pp.Service = &s
		}
		cc.Pools[name] = &pp
	}
	return &cc, texts
}

func sameConfig(a, b *Config) bool {
	a1, ta := withoutTemplates(a)
	b1, tb := withoutTemplates(b)
	return reflect.DeepEqual(a1, b1) && reflect.DeepEqual(ta, tb)
}

func TestServiceEffectiveRoundTrip(t *testing.T) {
	for name, text := range map[string]string{
		"nginx":    servicePool,
		"defaults": pool("") + "[pools.email.service]\n",
		"tcp":      svc(webPorts + "[pools.email.service.readiness]\ntype = \"tcp\"\nport = \"http\"\ninitial_delay_sec = 3\n"),
		"command":  svc("[pools.email.service]\ngroup_size = 3\ncpuset_split = true\n[pools.email.service.readiness]\ntype = \"command\"\ncommand = [\"/usr/bin/check\", \"-q\"]\n"),
		"notify":   svc("[pools.email.service.readiness]\ntype = \"notify\"\n[[pools.email.service.template]]\nsource = \"TESTDATA/plain.tmpl\"\ndestination = \"/etc/x.env\"\n"),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := load(t, withTestdata(t, text))
			if err != nil {
				t.Fatal(err)
			}
			again, effective := reloadEffective(t, c)
			again.Path = c.Path
			for _, p := range c.Pools {
				p.UserExplicit = true
			}
			if !sameConfig(again, c) {
				t.Errorf("round trip changed the config:\n%s", effective)
			}
			for name, p := range c.Pools {
				if d := Diff(p, again.Pools[name]); d != nil {
					t.Errorf("Diff after the round trip: %q", d)
				}
			}
		})
	}
}

func TestDiffService(t *testing.T) {
	base := withTestdata(t, servicePool)
	for _, tc := range []struct {
		name, from, to string
		want           []string
	}{
		{"same", base, base, nil},
		{"service added", strings.Split(base, "[pools.web.service]")[0], base, []string{"service"}},
		{"port base", base, strings.Replace(base, "http = 8001", "http = 9001", 1), []string{"service.ports"}},
		{"probe period", base, strings.Replace(base, "\nperiod_sec = 2\n", "\nperiod_sec = 3\n", 1), []string{"service.readiness.period_sec"}},
		{"probe type", base, strings.Replace(base, "type = \"http\"\npath = \"/health\"\n", "type = \"tcp\"\n", 1), []string{"service.readiness.path", "service.readiness.type"}},
		{"after_change", base, strings.Replace(base, `"reload", "nginx"`, `"restart", "nginx"`, 1), []string{"service.template"}},
		{"drain period", base, strings.Replace(base, "drain_period_sec = 20", "drain_period_sec = 0", 1), []string{"service.drain_period_sec"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := load(t, tc.from)
			if err != nil {
				t.Fatal(err)
			}
			b, err := load(t, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if got := Diff(a.Pools["web"], b.Pools["web"]); !slices.Equal(got, tc.want) {
				t.Errorf("Diff = %q, want %q", got, tc.want)
			}
		})
	}
}

// An edited template file is a change although the config is the same: a
// reload must hand the pool the new template.
func TestDiffServiceTemplateText(t *testing.T) {
	src := filepath.Join(t.TempDir(), "up.tmpl")
	text := svc("[[pools.email.service.template]]\nsource = \"" + src + "\"\ndestination = \"/etc/up.conf\"\n")
	if err := os.WriteFile(src, []byte("{{.Pool}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := load(t, text)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte("{{.Pool}} {{len .Replicas}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := load(t, text)
	if err != nil {
		t.Fatal(err)
	}
	if got := Diff(a.Pools["email"], b.Pools["email"]); !slices.Equal(got, []string{"service.template"}) {
		t.Errorf("Diff = %q, want [service.template]", got)
	}
	// A reload with a template that no longer parses is refused: the
	// daemon keeps the configuration it has.
	if err := os.WriteFile(src, []byte("{{.Pool\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, text); err == nil || !strings.Contains(err.Error(), "template does not parse: "+src+":2: unclosed action") {
		t.Errorf("broken template: %v", err)
	}
}

// Every field of Service, when changed, is reported under a key of the
// [service] table or of its readiness table.
func TestDiffServiceCoversEveryField(t *testing.T) {
	valid := map[string]bool{}
	for _, td := range []TableDoc{serviceKeys} {
		for _, n := range td.Names() {
			valid["service."+n] = true
		}
	}
	for _, td := range []TableDoc{readinessKeys, probeTimingKeys} {
		for _, n := range td.Names() {
			valid["service.readiness."+n] = true
		}
	}
	for _, n := range wakeKeys.Names() {
		valid["service.wake."+n] = true
	}
	paths := fieldPaths(reflect.TypeFor[Service](), reflect.TypeFor[probe.Spec]())
	for _, path := range paths {
		if path == "Readiness.Probe.Kind" {
			continue // Readiness.Kind is the key
		}
		old, new := &Pool{Service: &Service{}}, &Pool{Service: &Service{}}
		setNonZero(t, reflect.ValueOf(new.Service).Elem().FieldByIndex(fieldIndex(reflect.TypeFor[Service](), path)), path)
		if got := Diff(old, new); len(got) != 1 || !valid[got[0]] {
			t.Errorf("changing Service.%s: Diff = %q, want one key of the file", path, got)
		}
	}
	if len(paths) < 15 {
		t.Errorf("walked only %v", paths)
	}
}

// Issue 27, item 6: a template is read as config.toml is judged (a file
// anyone but root can write is refused when the daemon runs as root), and
// rendered under the same caps as at publish, so that a bad one is refused
// at load, naming the file, the key and what is wrong.
func TestServiceTemplateBounds(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("ownership is only judged when the daemon runs as root")
	}
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode, uid int) string {
		return testfile.Owned(t, filepath.Join(dir, name), text, mode, uid)
	}
	for _, tc := range []struct{ name, src, want string }{
		{"owned by nobody, mode 0666", write("nobody.tmpl", "x\n", 0o666, 65534), "owned by uid 65534, not root"},
		{"range over a number", write("range.tmpl", "{{range 30000000}}0123456789{{end}}", 0o644, 0), "template does not parse: " + dir + "/range.tmpl:1: range over the number 30000000"},
		{"over 4 MiB", write("big.tmpl", "{{$n := 30000000}}{{range $n}}0123456789{{end}}", 0o644, 0), "renders over 4 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, svc("[[pools.email.service.template]]\nsource = \""+tc.src+"\"\ndestination = \"/etc/up.conf\"\n"))
			_, err := Load(path)
			want := path + ": pools.email.service.template[0].source: "
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.src) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q naming %s and %q", err, want, tc.src, tc.want)
			}
		})
	}
}
