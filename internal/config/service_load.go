package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/discovery"
	"github.com/flexiq/flexiq-scaled/internal/probe"
)

// Reading and checking the [pools.NAME.service] table (issue 19); the types
// are in service.go, the keys' docs in servicedoc.go. The tables under it
// are read as raw values, like the rules, and their keys checked against
// their TableDocs, so that a key is taken only if it is documented.

// serviceLoader reads the [pools.NAME.service] tables, and checks them
// across pools once every pool is read (service_checks.go).
type serviceLoader struct{ *reader }

// service fills p.Service from [pools.NAME.service]; a pool without the
// table is a pool of queue workers and keeps Service nil.
func (l *serviceLoader) service(p *Pool, raw value, key func(...string) string) {
	if !raw.set() {
		return
	}
	m, ok := l.table(key("service"), raw.raw, serviceKeys.Names()...)
	if !ok {
		return
	}
	k := func(parts ...string) string { return key(append([]string{"service"}, parts...)...) }
	s := &Service{
		Readiness:      Readiness{Kind: ReadyActive},
		Address:        DefaultServiceAddress,
		DiscoveryDir:   discovery.DefaultDir,
		DrainPeriod:    DefaultDrainPeriod,
		ReadyTimeout:   DefaultReadyTimeout,
		UnreadyTimeout: DefaultUnreadyTimeout,
		GroupSize:      1,
	}
	p.Service = s
	l.serviceScalars(s, m, k)
	l.ports(p, s, m["ports"], k)
	if l.str(k("metrics_port"), m["metrics_port"], &s.MetricsPort) && !slices.Contains(portNames(s), s.MetricsPort) {
		l.add(k("metrics_port"), "%q is not declared in [%s] (declared: %s)", s.MetricsPort, k("ports"), describePorts(s))
		s.MetricsPort = ""
	}
	l.serviceReadiness(s, m["readiness"], k)
	if s.Readiness.Kind == ReadyCommand && s.Readiness.User == "" {
		// Unset: the probe runs as the workers do.
		s.Readiness.User = p.User
	}
	l.templates(p, s, m["template"], k)
	l.wake(p, s, m["wake"], k)
	for _, name := range slices.Sorted(maps.Keys(p.Environment)) {
		if reservedServiceEnv(name) {
			l.add(key("environment", name), "reserved in a service pool: flexiq-scaled sets %s*, %s, %s and %s* on every replica",
				PortEnvPrefix, RankEnv, GroupSizeEnv, PeersEnvPrefix)
		}
	}
}

// serviceScalars reads the table's own keys.
func (l *serviceLoader) serviceScalars(s *Service, m map[string]value, k func(...string) string) {
	if l.str(k("address"), m["address"], &s.Address) {
		ip, err := netip.ParseAddr(s.Address)
		switch {
		case err != nil || ip.Zone() != "":
			l.add(k("address"), "%q is not an IP address (as 127.0.0.1 or ::1, without a zone)", s.Address)
			s.Address = DefaultServiceAddress
		case ip.IsUnspecified() || ip.IsMulticast():
			l.add(k("address"), "%s cannot be connected to: write the address a proxy reaches the replicas at", s.Address)
			s.Address = DefaultServiceAddress
		default:
			s.Address = ip.String()
		}
	}
	if l.str(k("discovery_dir"), m["discovery_dir"], &s.DiscoveryDir) {
		l.visiblePath(k("discovery_dir"), &s.DiscoveryDir, "the discovery files")
		if s.DiscoveryDir == "" {
			s.DiscoveryDir = discovery.DefaultDir
		}
	}
	if l.seconds(k("drain_period_sec"), m["drain_period_sec"], &s.DrainPeriod) && s.DrainPeriod < 0 {
		l.add(k("drain_period_sec"), "must be >= 0")
		s.DrainPeriod = DefaultDrainPeriod
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"ready_timeout_sec", &s.ReadyTimeout}, {"unready_timeout_sec", &s.UnreadyTimeout}} {
		def := *d.dst
		if l.seconds(k(d.name), m[d.name], d.dst) && *d.dst <= 0 {
			l.add(k(d.name), "must be > 0")
			*d.dst = def
		}
	}
	if l.integer(k("group_size"), m["group_size"], &s.GroupSize) && s.GroupSize < 1 {
		l.add(k("group_size"), "must be >= 1")
		s.GroupSize = 1
	}
	if l.boolean(k("cpuset_split"), m["cpuset_split"], &s.CPUSetSplit) && s.CPUSetSplit && s.GroupSize < 2 {
		l.add(k("cpuset_split"), "splits the CPUs across a group's ranks: it needs group_size >= 2 (it is %d)", s.GroupSize)
		s.CPUSetSplit = false
	}
}

// visiblePath checks that *path is absolute and outside what the daemon's
// sandbox hides, and cleans it; else it is a problem and *path is emptied.
func (r *reader) visiblePath(key string, path *string, what string) {
	if !filepath.IsAbs(*path) {
		r.add(key, "%q must be an absolute path", *path)
		*path = ""
		return
	}
	*path = filepath.Clean(*path)
	if h, hidden := hiddenBy(*path); hidden {
		r.add(key, "%s: %s, so no other program would see %s there", *path, fmt.Sprintf(h.reason, h.dir), what)
		*path = ""
	}
}

func (r *reader) boolean(key string, v value, dst *bool) bool {
	if !v.set() {
		return false
	}
	b, ok := v.raw.(bool)
	if !ok {
		r.wrongType(key, "a boolean", v)
		return false
	}
	*dst = b
	return true
}

// reservedServiceEnv: the variables a service pool's replicas get from the
// daemon; a pool's environment must not shadow them.
func reservedServiceEnv(name string) bool {
	return strings.HasPrefix(name, PortEnvPrefix) || strings.HasPrefix(name, PeersEnvPrefix) ||
		name == RankEnv || name == GroupSizeEnv
}

// serviceReadiness fills s.Readiness from [pools.NAME.service.readiness].
func (l *serviceLoader) serviceReadiness(s *Service, raw value, k func(...string) string) {
	if !raw.set() {
		return
	}
	rk := k("readiness")
	m, ok := l.table(rk, raw.raw, append(readinessKeys.Names(), probeTimingKeys.Names()...)...)
	if !ok {
		return
	}
	kind := ReadyActive
	l.str(rk+".type", m["type"], &kind)
	rkind, known := readinessKindOf(kind)
	if !known {
		l.add(rk+".type", "unknown readiness type %q (want %s)", kind, readinessKindNames("%q"))
		return
	}
	good := true
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if name != "type" && !slices.Contains(rkind.allowed(), name) {
			l.add(rk+"."+name, "does not apply to type = %q", kind)
			good = false
		}
	}
	if !good || !rkind.probe {
		s.Readiness = Readiness{Kind: kind}
		return
	}
	spec := probe.Spec{Kind: probe.Kind(kind)}
	var user string
	if !rkind.decode(l.reader, rk, m, &spec, &user) {
		return
	}
	if !l.probeTiming(&spec, m, rk) {
		return
	}
	spec = spec.WithDefaults()
	// The prefix is cut off again: the problem names the key itself.
	if err := spec.Validate("\x00", portNames(s)); err != nil {
		k, msg := probeProblem(rk, strings.TrimPrefix(err.Error(), "\x00: "))
		l.add(k, "%s", msg)
		return
	}
	s.Readiness = Readiness{Kind: kind, Probe: spec, User: user}
}

// probeTiming reads the timing keys. probe.Spec takes a zero as "the
// default", so a zero written out is refused here rather than turned into
// the default behind the writer's back.
func (l *serviceLoader) probeTiming(spec *probe.Spec, m map[string]value, rk string) bool {
	good := true
	if l.seconds(rk+".initial_delay_sec", m["initial_delay_sec"], &spec.InitialDelay) && spec.InitialDelay < 0 {
		l.add(rk+".initial_delay_sec", "must be >= 0")
		good = false
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"period_sec", &spec.Period}, {"timeout_sec", &spec.Timeout}} {
		if l.seconds(rk+"."+d.name, m[d.name], d.dst) && *d.dst <= 0 {
			l.add(rk+"."+d.name, "must be > 0")
			good = false
		}
	}
	for _, d := range []struct {
		name string
		dst  *int
	}{{"success_threshold", &spec.SuccessThreshold}, {"failure_threshold", &spec.FailureThreshold}} {
		if l.integer(rk+"."+d.name, m[d.name], d.dst) && *d.dst < 1 {
			l.add(rk+"."+d.name, "must be >= 1")
			good = false
		}
	}
	return good
}

// probeProblem splits probe.Spec.Validate's "key = value: why" or "key:
// why" into the key of table rk, in the file's spelling, and the rest; a
// message of another shape stays whole, on the table.
func probeProblem(rk, s string) (key, msg string) {
	i := strings.IndexAny(s, " :")
	if i <= 0 {
		return rk, s
	}
	key, msg = s[:i], strings.TrimPrefix(strings.TrimPrefix(s[i:], " = "), ": ")
	if key == "kind" {
		key = "type"
	}
	return rk + "." + key, msg
}

// templates fills s.Templates from [[pools.NAME.service.template]], each
// parsed and executed once on a sample of the pool's replicas, so that a
// template that cannot render is refused at load (and so at reload, which
// then keeps the old configuration).
func (l *serviceLoader) templates(p *Pool, s *Service, raw value, k func(...string) string) {
	var list []any
	switch v := raw.raw.(type) {
	case nil:
		return
	case []map[string]any:
		for _, m := range v {
			list = append(list, m)
		}
	case []any:
		list = v
	default:
		l.wrongType(k("template"), "an array of tables, as in [[pools.NAME.service.template]]", raw)
		return
	}
	sample := sampleSet(p, s)
	dests := map[string]string{}
	for i, e := range list {
		tk := fmt.Sprintf("%s[%d]", k("template"), i)
		t, ok := l.template(tk, e, sample)
		if !ok {
			continue
		}
		if other, dup := dests[t.Spec.Destination]; dup {
			l.add(tk+".destination", "%s is also %s's destination: each would overwrite the other", t.Spec.Destination, other)
			continue
		}
		dests[t.Spec.Destination] = tk
		s.Templates = append(s.Templates, t)
	}
}

// template reads, loads and checks one template table.
func (l *serviceLoader) template(tk string, raw any, sample discovery.Set) (*discovery.Template, bool) {
	m, ok := l.table(tk, raw, templateKeys.Names()...)
	if !ok {
		return nil, false
	}
	spec := discovery.TemplateSpec{Mode: 0o644}
	good := true
	for _, f := range []struct {
		name, what string
		dst        *string
	}{{"source", "the template", &spec.Source}, {"destination", "the rendered file", &spec.Destination}} {
		switch {
		case !m[f.name].set():
			l.add(tk+"."+f.name, "missing: the path of %s", f.what)
			good = false
		case !l.str(tk+"."+f.name, m[f.name], f.dst):
			good = false
		case f.name == "source":
			// Read here, so a source the daemon's sandbox hides
			// fails to read, and LoadTemplate's error says why.
			if !filepath.IsAbs(*f.dst) {
				l.add(tk+".source", "%q must be an absolute path", *f.dst)
				good = false
			}
		default:
			l.visiblePath(tk+"."+f.name, f.dst, f.what)
			good = good && *f.dst != ""
		}
	}
	var mode string
	if l.str(tk+".mode", m["mode"], &mode) {
		n, err := strconv.ParseUint(mode, 8, 32)
		if err != nil || n == 0 || n > 0o777 || len(mode) < 3 {
			l.add(tk+".mode", "%q is not a file mode: write permissions in octal, as \"0644\" or \"0640\"", mode)
			good = false
		}
		spec.Mode = os.FileMode(n)
	}
	if !l.afterChange(tk, m, &spec) || !good {
		return nil, false
	}
	t, err := discovery.LoadTemplate(tk, spec)
	if err != nil {
		var te *discovery.TemplateError
		if errors.As(err, &te) {
			l.add(tk+".source", "template does not parse: %v", te)
		} else {
			why := ""
			if h, hidden := hiddenBy(filepath.Clean(spec.Source)); hidden && errors.Is(err, fs.ErrNotExist) {
				why = ": " + fmt.Sprintf(h.reason, h.dir) + "; keep templates elsewhere, e.g. under /etc/flexiq-scaled"
			}
			l.add(tk+".source", "%s%s", strings.TrimPrefix(err.Error(), tk+".source: "), why)
		}
		return nil, false
	}
	if err := t.Check(sample); err != nil {
		l.add(tk+".source", "template fails on a sample of this pool's replicas (ports: %s): %v", portsOf(sample), err)
		return nil, false
	}
	return t, true
}

// afterChange reads after_change and its timeout into spec.After.
func (l *serviceLoader) afterChange(tk string, m map[string]value, spec *discovery.TemplateSpec) bool {
	var argv []string
	timeout := discovery.DefaultCommandTimeout
	timeoutSet := l.seconds(tk+".after_change_timeout_sec", m["after_change_timeout_sec"], &timeout)
	switch {
	case timeoutSet && !m["after_change"].set():
		l.add(tk+".after_change_timeout_sec", "only with after_change: it bounds that command")
		return false
	case timeoutSet && timeout <= 0:
		l.add(tk+".after_change_timeout_sec", "must be > 0")
		return false
	case !m["after_change"].set():
		return true
	case !l.strings(tk+".after_change", m["after_change"], &argv):
		return false
	}
	c, err := discovery.NewCommand(tk+".after_change", argv, timeout)
	if err != nil {
		l.add(tk+".after_change", "%s (the command runs without a shell or a PATH search)",
			strings.TrimPrefix(err.Error(), tk+".after_change: "))
		return false
	}
	spec.After = &c
	return true
}

// sampleSet is one replica (one group) of the pool, with every declared
// port, for Template.Check.
func sampleSet(p *Pool, s *Service) discovery.Set {
	var rs []discovery.Replica
	for rank := range max(s.GroupSize, 1) {
		ports := map[string]int{}
		for _, port := range s.Ports {
			ports[port.Name] = 32768 + rank
			if port.Base > 0 {
				ports[port.Name] = port.Base + rank
			}
		}
		rs = append(rs, discovery.Replica{Slot: 1, Unit: fmt.Sprintf("flexiq-%s@1.service", p.Name),
			Address: s.Address, Ports: ports, Rank: rank})
	}
	return discovery.NewSet(p.Name, rs)
}

func portsOf(s discovery.Set) string {
	if len(s.Replicas) == 0 || len(s.Replicas[0].Ports) == 0 {
		return "none declared"
	}
	return strings.Join(slices.Sorted(maps.Keys(s.Replicas[0].Ports)), ", ")
}
