package config

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// MachineIDPath is where host_id comes from when [fleet] does not set it.
const MachineIDPath = "/etc/machine-id"

// fleetSchemes are the URL schemes of the coordination stores.
var fleetSchemes = []string{"redis", "rediss", "postgres", "postgresql"}

// The timing keys of both fleet tables, in the order they are checked: those
// documented (fleetdoc.go).
var fleetTimingKeys = TableDoc{Keys: fleetTimingDocs}.Names()

// hostIDRE bounds host_id: it is part of the store's keys and rows, and of
// every status line; a machine-id (32 hex digits) fits.
var hostIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// FleetStore names the coordination store of a URL by its scheme
// (FleetStoreRedis or FleetStorePostgres).
func FleetStore(rawURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return "", fmt.Errorf("not a URL: %s", urlParseError(err))
	}
	return FleetStoreOf(u.Scheme)
}

// FleetStoreOf names the coordination store of a URL scheme: the one
// place that knows which scheme is which store (the checks at load, and
// internal/fleet/stores, which opens it).
func FleetStoreOf(scheme string) (string, error) {
	switch scheme {
	case "redis", "rediss":
		return FleetStoreRedis, nil
	case "postgres", "postgresql":
		return FleetStorePostgres, nil
	}
	return "", fmt.Errorf("scheme %q: want one of %v", scheme, fleetSchemes)
}

// ReadMachineID reads this host's id as host_id defaults to it: the trimmed
// contents of path (MachineIDPath), which must not be empty.
func ReadMachineID(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(data))
	if id == "" {
		return "", errors.New(path + " is empty")
	}
	return id, nil
}

// fleetLoader reads the fleet tables: the daemon's [fleet], then each
// pool's [pools.NAME.fleet] over it.
type fleetLoader struct {
	*reader
	// tab is the daemon-level [fleet] as written, under the pools' fleet
	// tables; machineIDPath where host_id defaults from.
	tab           *fleetTable
	machineIDPath string
}

// fleetTable is one fleet table as written, each key checked on its own:
// the relations between the timings are checked on the values in effect
// (fleetLoader.timings), which for a pool take [fleet]'s under its own.
type fleetTable struct {
	// conn is nil when the table writes no connection key; written, the
	// connection keys are one connection, taken whole.
	conn    *Conn
	hostID  string
	timings map[string]time.Duration // the timing keys written, each > 0
	key     func(string) string
}

// table reads a fleet table with the keys names (the table's own),
// through the source decoder, so that its connection keys are checked as a
// source's are.
func (l *fleetLoader) table(r rawSourceTable, key func(string) string, names []string) (*SourceDecoder, fleetTable) {
	t := fleetTable{timings: map[string]time.Duration{}, key: key}
	mine := rawSourceTable{}
	for _, k := range slices.Sorted(maps.Keys(r)) {
		switch {
		case k == "host_id" && !slices.Contains(names, k):
			l.add(key(k), "only [fleet] sets host_id: it names this host, in every fleet the host's pools join")
			continue
		case !slices.Contains(names, k):
			l.add(key(k), "unknown key (want %s)", strings.Join(names, ", "))
			continue
		}
		mine[k] = r[k]
	}
	d := &SourceDecoder{l: l.reader, typ: "fleet", key: key, keys: mine}
	if slices.ContainsFunc(ConnKeys, func(k KeyDoc) bool { return d.Has(k.Name) }) {
		t.conn = &Conn{}
		d.Conn(t.conn, fleetSchemes...)
	}
	if d.String("host_id", &t.hostID) && !hostIDRE.MatchString(t.hostID) {
		d.Errorf("host_id", "%q: want 1 to 64 letters, digits, '.', '_', ':' or '-' (it names this host in the store)", t.hostID)
		t.hostID = ""
	}
	for _, k := range fleetTimingKeys {
		var v time.Duration
		if !d.Seconds(k, &v) {
			continue
		}
		if v <= 0 {
			d.Errorf(k, "must be > 0")
			continue
		}
		t.timings[k] = v
	}
	return d, t
}

// daemon reads the daemon-level [fleet] table.
func (l *fleetLoader) daemon(r rawSourceTable) *Fleet {
	if r == nil {
		return nil
	}
	_, t := l.table(r, func(k string) string { return "fleet." + k }, fleetKeys.Names())
	l.tab = &t
	f := &Fleet{HostID: t.hostID}
	if t.conn != nil {
		f.Conn = *t.conn
		f.Store = storeOf(f.Conn)
	}
	l.timings(f, t)
	return f
}

// storeOf is the store a written URL names; "" while the URL is in a file
// or a credential, which the daemon reads at start (FleetStore).
func storeOf(c Conn) string {
	if u, err := url.Parse(c.URL); c.URL != "" && err == nil {
		s, _ := FleetStoreOf(u.Scheme)
		return s
	}
	return ""
}

// timings fills f's timings from the tables (the [fleet] table, then
// the pool's, which wins) and checks how they relate. A problem names the
// key where the last table sets it: one that only [fleet] sets was
// reported there, with [fleet]'s values.
func (l *fleetLoader) timings(f *Fleet, tables ...fleetTable) {
	last := tables[len(tables)-1]
	get := func(k string, def time.Duration) time.Duration {
		for i := len(tables) - 1; i >= 0; i-- {
			if v, ok := tables[i].timings[k]; ok {
				return v
			}
		}
		return def
	}
	f.TTL = get("ttl_sec", DefaultFleetTTL)
	f.Heartbeat = get("heartbeat_sec", DefaultFleetHeartbeat)
	f.Renew = get("renew_sec", f.TTL/3)
	f.Hold = get("hold_sec", 2*f.TTL)
	// report names the first of keys that the last table sets.
	report := func(keys []string, format string, args ...any) {
		for _, k := range keys {
			if _, ok := last.timings[k]; ok {
				l.add(last.key(k), format, args...)
				return
			}
		}
	}
	// As the coordinator judges it (2 × heartbeat > ttl), without the
	// overflow of a huge heartbeat doubled.
	if f.Heartbeat > f.TTL-f.Heartbeat {
		report([]string{"heartbeat_sec", "ttl_sec"},
			"heartbeat_sec (%g) must be at most half of ttl_sec (%g): a host is gone after about 3 missed heartbeats, "+
				"and the lease must outlive two of them; the coordinator refuses more", f.Heartbeat.Seconds(), f.TTL.Seconds())
	}
	if late := fleet.LatestRenewal(f.Renew, f.Heartbeat); late >= f.TTL {
		report([]string{"renew_sec", "ttl_sec", "heartbeat_sec"},
			"renew_sec (%g) is too long for ttl_sec (%g): with its ±%g %% jitter and up to a heartbeat_sec (%g) until the step that renews, "+
				"a renewal may come %gs after the last, and the lease lapses first; keep %g × renew_sec + heartbeat_sec under ttl_sec",
			f.Renew.Seconds(), f.TTL.Seconds(), fleet.RenewJitter*100, f.Heartbeat.Seconds(), late.Seconds(), 1+fleet.RenewJitter)
	}
}

// pool reads [pools.NAME.fleet]: the pool joins a fleet, its store and
// timings those of [fleet] under its own keys. After scaling, whose rules
// it judges.
func (l *fleetLoader) pool(p *Pool, r rawSourceTable, key func(...string) string) {
	if r == nil {
		return
	}
	fkey := func(k string) string { return key("fleet", k) }
	names := poolFleetKeys.Names()
	d, t := l.table(r, fkey, names)
	pf := &PoolFleet{CapacityAuto: true}
	switch raw := d.Raw("capacity").(type) {
	case nil:
	case string:
		if raw != "auto" {
			d.Errorf("capacity", `%q: want a number of workers (>= 1) or "auto"`, raw)
		}
	default:
		if d.Int("capacity", &pf.Capacity) {
			if pf.Capacity < 1 {
				d.Errorf("capacity", `must be >= 1, or "auto"`)
				pf.Capacity = 0
			} else {
				pf.CapacityAuto = false
			}
		}
	}
	tables := []fleetTable{t}
	if l.tab != nil {
		tables = []fleetTable{*l.tab, t}
	}
	switch {
	case t.conn != nil:
		pf.Conn = *t.conn
	case l.tab != nil && l.tab.conn != nil:
		pf.Conn = *l.tab.conn
	default:
		l.add(key("fleet"), "no coordination store: set url (or url_file, url_credential) in [fleet], for every pool, or here, for this one")
	}
	pf.Store = storeOf(pf.Conn)
	l.timings(&pf.Fleet, tables...)
	p.Fleet = pf
	l.policy(p, key)
}

// policy refuses what a fleet's one decision cannot coordinate: the
// leader decides for every host from the queue, which all of them share,
// and knows nothing of the other hosts' machines.
func (l *fleetLoader) policy(p *Pool, key func(...string) string) {
	if p.TargetCPUUtilisation > 0 {
		l.add(key("target_cpu_utilisation"), "not in a pool that joins a fleet: worker CPU is not coordinated across hosts, "+
			"and the leader would scale every host on its own workers' CPU; leave it out, or the pool's [pools.%s.fleet]", p.Name)
	}
	check := func(k string, r policy.Rule) {
		c, err := policy.CompileRule(r)
		if err != nil {
			return // reported by the rule's own checks
		}
		for _, s := range c.Signals {
			switch {
			case slices.Contains(policy.HostSignals, s):
				l.add(k+".when", "reads %s, a signal of this host, in a pool that joins a fleet: the leader decides for every host, "+
					"and one host's load says nothing of the others'; use the queue's signals (the host guard still protects each host)", s)
			case s == "worker_cpu":
				l.add(k+".when", "reads worker_cpu in a pool that joins a fleet: worker CPU is not coordinated across hosts, "+
					"the leader sees only its own workers'; use the queue's signals")
			}
		}
	}
	for i, r := range p.Scaling.ScaleUp {
		check(fmt.Sprintf("%s[%d]", key("scale_up"), i), r)
	}
	if p.Scaling.ScaleDown != nil {
		check(key("scale_down"), *p.Scaling.ScaleDown)
	}
}

// hostID gives every pool that joins a fleet this host's id: [fleet]'s
// host_id, or the machine id. Read only when a pool joins: a [fleet] table
// alone needs none.
func (l *fleetLoader) hostID(c *Config) {
	joins := slices.ContainsFunc(slices.Collect(maps.Values(c.Pools)), (*Pool).Joins)
	if !joins {
		return
	}
	id := ""
	if c.Fleet != nil {
		id = c.Fleet.HostID
	}
	if id == "" {
		var err error
		if id, err = ReadMachineID(l.machineIDPath); err != nil {
			l.add("fleet.host_id", "cannot default to the machine id (%v): set host_id in [fleet], a name unique in the fleet", err)
			return
		}
		if !hostIDRE.MatchString(id) {
			l.add("fleet.host_id", "the machine id in %s is not a host id (1 to 64 letters, digits, '.', '_', ':' or '-'): set host_id in [fleet]", l.machineIDPath)
			return
		}
	}
	if c.Fleet != nil {
		c.Fleet.HostID = id
	}
	for _, p := range c.Pools {
		if p.Joins() {
			p.Fleet.HostID = id
		}
	}
}

// fleetCapped is the capped capacity of a pool that joins a fleet, when
// its written capacity is more than the fit workers that fit on host.
// "auto" is never capped: it is what fits.
func fleetCapped(p *Pool, fit int, host string) (Capped, bool) {
	if p.Fleet.CapacityAuto || p.Fleet.Capacity <= fit {
		return Capped{}, false
	}
	return Capped{Pool: p.Name, From: p.Fleet.Capacity, To: fit, Key: "fleet.capacity",
		Why: fmt.Sprintf("fleet capacity: only %d %s fit on %s", fit, workersNoun(p), host)}, true
}

// resolveFleetCapacity sets the capacity of a pool that joins a fleet from
// fit, the workers that fit on this host: "auto" is fit, at most
// max_workers (the fleet holds no more); a number is at most fit.
func resolveFleetCapacity(p *Pool, fit int) {
	switch {
	case !p.Joins():
	case p.Fleet.CapacityAuto:
		p.Fleet.Capacity = min(fit, p.MaxWorkers)
	default:
		p.Fleet.Capacity = min(p.Fleet.Capacity, fit)
	}
}

// effective is [fleet] as WriteEffective writes it: its fields' keys, as
// a source type's settings are written.
func (f *Fleet) effective() any {
	if f == nil {
		return nil
	}
	return effectiveOf(*f, nil)
}

// effective writes the pool's store and timings in effect, its own and
// [fleet]'s alike: loaded again, they are the pool's own, with the same
// values. Not host_id, which only [fleet] sets.
func (p *PoolFleet) effective() any {
	if p == nil {
		return nil
	}
	var capacity any = p.Capacity
	if p.CapacityAuto {
		capacity = "auto"
	}
	return effectiveOf(*p, []effectiveField{{"Capacity", `toml:"capacity"`, capacity}}, "capacity", "host_id")
}

// DiffFleet names the keys of the [fleet] table that differ between old
// and new, as Diff does for a pool's; "fleet" when the table was added or
// removed. A pool that joins a fleet takes [fleet]'s values into its own
// (Pool.Fleet), so that Diff reports them for each such pool too.
func DiffFleet(old, new *Fleet) []string {
	return diffTables(old, new, "fleet", "fleet.")
}
