// Package discovery renders the files that publish a pool's ready replicas
// to the programs that must reach them: issue 19, item 3 ("Discovery: one
// address for the pool") and the file half of item 4 ("Drain without a
// failed request").
//
// It is pure: no D-Bus, no controller. A pool's loop hands a Publisher the
// pool's ready Set on every change; the Publisher renders
//
//   - DIR/POOL.json, the ready replicas (schema in RenderJSON),
//   - DIR/POOL.file_sd.json, a Prometheus file_sd file of the replicas'
//     metrics ports (RenderFileSD),
//   - each user template (Go text/template, see Template) to its own path,
//
// writes each atomically (internal/atomicfile) and only when its content
// changed, and returns the outputs that changed with their after-change
// Commands. DIR is /run/flexiq-scaled/discovery by default (DefaultDir).
//
// Drain order (item 4): to retire a replica the caller publishes the set
// without it (Set.Without), runs Result.Commands() and waits for them, and
// only then starts the replica's drain period. Publish returns once every
// file is in place, so the files never list a replica the caller has
// begun to stop.
//
// Who uses it: internal/config loads the templates at load and reload
// (LoadTemplate, Template.Check), so that an error names the file and the
// line; the pool's loop (internal/controller, publish.go) publishes its
// ready set on every change and runs the after-change commands as
// transient units, off the loop. docs/services.md is the user's view.
package discovery

import (
	"net"
	"slices"
	"strconv"
)

// DefaultDir is where the JSON and file_sd files go unless the caller says.
const DefaultDir = "/run/flexiq-scaled/discovery"

// Replica is one ready replica, or one rank of a gang group: the group's
// ranks share its Slot and differ in Rank (0 … N−1); a pool without gang
// groups has Rank 0 everywhere.
type Replica struct {
	Slot    int
	Unit    string
	Address string         // the address others reach it at, e.g. 127.0.0.1
	Ports   map[string]int // by the pool's port names
	Rank    int
}

// HostPort is Address:port of the named port, bracketed for IPv6; an
// undeclared port is an error, so that a template naming a port the pool
// lacks fails rather than rendering an empty backend.
func (r Replica) HostPort(name string) (string, error) {
	p, ok := r.Ports[name]
	if !ok {
		return "", &missingPortError{unit: r.Unit, port: name}
	}
	return net.JoinHostPort(r.Address, strconv.Itoa(p)), nil
}

// Port is the number of the named port; an undeclared port is an error.
func (r Replica) Port(name string) (int, error) {
	p, ok := r.Ports[name]
	if !ok {
		return 0, &missingPortError{unit: r.Unit, port: name}
	}
	return p, nil
}

type missingPortError struct{ unit, port string }

func (e *missingPortError) Error() string {
	return "replica " + e.unit + " has no port " + strconv.Quote(e.port)
}

// Set is a pool's ready replicas, sorted by slot then rank (NewSet), so
// that the same replicas always render the same bytes.
type Set struct {
	Pool     string
	Replicas []Replica
	// Wake is the pool's wake address (host:port, issue 29), "" when it
	// has none: where a template's empty branch sends the traffic that
	// finds no ready replica. The Publisher fills it in.
	Wake string
}

// NewSet copies replicas and sorts them by slot, then rank.
func NewSet(pool string, replicas []Replica) Set {
	rs := slices.Clone(replicas)
	slices.SortStableFunc(rs, func(a, b Replica) int {
		if a.Slot != b.Slot {
			return a.Slot - b.Slot
		}
		return a.Rank - b.Rank
	})
	return Set{Pool: pool, Replicas: rs}
}

// Without is the set less every rank of the given slots: what the caller
// publishes before it drains those replicas.
func (s Set) Without(slots ...int) Set {
	out := Set{Pool: s.Pool, Wake: s.Wake, Replicas: make([]Replica, 0, len(s.Replicas))}
	for _, r := range s.Replicas {
		if !slices.Contains(slots, r.Slot) {
			out.Replicas = append(out.Replicas, r)
		}
	}
	return out
}

// Leaders is the rank-0 replicas: one per gang group, every replica of a
// pool without groups. Rank 0 is the group's address in discovery and the
// rank whose metrics are scraped (issue 19, item 5), so templates that
// want one backend per group range over .Leaders.
func (s Set) Leaders() []Replica {
	out := make([]Replica, 0, len(s.Replicas))
	for _, r := range s.Replicas {
		if r.Rank == 0 {
			out = append(out, r)
		}
	}
	return out
}
