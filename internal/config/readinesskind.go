package config

import (
	"fmt"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/probe"
)

// A readinessKind is one value of [pools.NAME.service.readiness] type, as
// the source types are for [pools.NAME.source]: declared once, in
// readinessKinds, with the keys it takes, how it reads them and how
// WriteEffective writes them back. The loader's checks (a key that does not
// apply, an unknown type), the effective output and the reference's list of
// types all read that list, so that a new kind is added there alone (and its
// keys documented in readinessKeys: TestReadinessKindsDocumented).
type readinessKind struct {
	name string
	// probe says the daemon probes the replicas: the kind takes the
	// timing keys (probeTimingKeys) and fills Readiness.Probe.
	probe bool
	// keys are the kind's own keys, besides type and the timings.
	keys []string
	// decode reads the kind's keys from table rk into spec (and user);
	// false when one is missing and the probe cannot be built.
	decode func(l *reader, rk string, m map[string]value, spec *probe.Spec, user *string) bool
	// effective writes the kind's keys as WriteEffective does.
	effective func(r Readiness, m map[string]any)
}

var readinessKinds = []readinessKind{
	{name: ReadyActive},
	{name: ReadyNotify},
	{name: ReadyHTTP, probe: true, keys: []string{"path", "port"},
		decode: func(l *reader, rk string, m map[string]value, spec *probe.Spec, _ *string) bool {
			spec.Path = "/"
			l.str(rk+".path", m["path"], &spec.Path)
			l.str(rk+".port", m["port"], &spec.Port)
			return true
		},
		effective: func(r Readiness, m map[string]any) { m["path"], m["port"] = r.Probe.Path, r.Probe.Port }},
	{name: ReadyTCP, probe: true, keys: []string{"port"},
		decode: func(l *reader, rk string, m map[string]value, spec *probe.Spec, _ *string) bool {
			l.str(rk+".port", m["port"], &spec.Port)
			return true
		},
		effective: func(r Readiness, m map[string]any) { m["port"] = r.Probe.Port }},
	{name: ReadyCommand, probe: true, keys: []string{"command", "user"},
		decode: func(l *reader, rk string, m map[string]value, spec *probe.Spec, user *string) bool {
			if !m["command"].set() {
				l.add(rk+".command", "missing: the command line whose exit status 0 is ready")
				return false
			}
			l.strings(rk+".command", m["command"], &spec.Command)
			if l.str(rk+".user", m["user"], user) {
				l.accountName(rk+".user", *user)
			}
			return true
		},
		effective: func(r Readiness, m map[string]any) {
			m["command"] = r.Probe.Command
			if r.User != "" {
				m["user"] = r.User
			}
		}},
}

// readinessKindOf is the kind named, if there is one.
func readinessKindOf(name string) (readinessKind, bool) {
	for _, k := range readinessKinds {
		if k.name == name {
			return k, true
		}
	}
	return readinessKind{}, false
}

// allowed are the keys the kind takes besides type.
func (k readinessKind) allowed() []string {
	if !k.probe {
		return k.keys
	}
	return append(k.keys[:len(k.keys):len(k.keys)], probeTimingKeys.Names()...)
}

// readinessKindNames are the kinds, each formatted by format ("%q"), in the
// order declared: "a, b or c".
func readinessKindNames(format string) string {
	names := make([]string, len(readinessKinds))
	for i, k := range readinessKinds {
		names[i] = fmt.Sprintf(format, k.name)
	}
	last := len(names) - 1
	return strings.Join(names[:last], ", ") + " or " + names[last]
}
