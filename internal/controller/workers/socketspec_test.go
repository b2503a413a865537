package workers

import (
	"reflect"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// TestSocketSpec: a port with socket = true becomes the start's
// units.SocketSpec, on the pool's address, and still reaches the replica
// as FLEXIQ_PORT_<NAME>; socket or not is part of the revision, so that
// turning it on or off rolls the replicas.
func TestSocketSpec(t *testing.T) {
	ports := map[string]int{"http": 8003, "metrics": 40001}
	for _, tc := range []struct {
		name  string
		ports []config.Port
		want  *units.SocketSpec
	}{
		{"no socket port", []config.Port{{Name: "http", Base: 8001}, {Name: "metrics"}}, nil},
		{"a fixed socket port", []config.Port{{Name: "http", Base: 8001, Socket: true}, {Name: "metrics"}},
			&units.SocketSpec{Name: "http", Address: "10.0.0.5", Port: 8003}},
		{"an auto socket port", []config.Port{{Name: "http", Base: 8001}, {Name: "metrics", Socket: true}},
			&units.SocketSpec{Name: "metrics", Address: "10.0.0.5", Port: 40001}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testPool("web")
			c.Service = &config.Service{Address: "10.0.0.5", GroupSize: 1, Ports: tc.ports}
			s := specFor(c, 3, "rev", ports)
			if !reflect.DeepEqual(s.Socket, tc.want) {
				t.Errorf("Socket %+v, want %+v", s.Socket, tc.want)
			}
			if s.Environment["FLEXIQ_PORT_HTTP"] != "8003" || s.Environment["FLEXIQ_PORT_METRICS"] != "40001" {
				t.Errorf("environment %v lacks the ports", s.Environment)
			}
		})
	}
	revs := map[string]string{}
	for name, p := range map[string]config.Port{
		"auto": {Name: "http"}, "auto socket": {Name: "http", Socket: true},
		"base": {Name: "http", Base: 8001}, "base socket": {Name: "http", Base: 8001, Socket: true},
	} {
		c := testPool("web")
		c.Service = &config.Service{GroupSize: 1, Ports: []config.Port{p}}
		rev := specRevision(revisionSpec(c), "")
		for other, r := range revs {
			if r == rev {
				t.Errorf("%s and %s have the same revision", name, other)
			}
		}
		revs[name] = rev
	}
}
