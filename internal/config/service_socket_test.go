package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// A port written as a table: its number as the plain form writes it, and
// socket = true for a port that systemd binds (issue 27, item 1).
func TestServiceSocketPorts(t *testing.T) {
	for _, tc := range []struct {
		name, ports string
		want        []Port
	}{
		{"inline auto", `http = { port = "auto", socket = true }`, []Port{{Name: "http", Socket: true}}},
		{"inline base", `http = { port = 8001, socket = true }`, []Port{{Name: "http", Base: 8001, Socket: true}}},
		{"socket false is a plain port", `http = { port = 8001, socket = false }`, []Port{{Name: "http", Base: 8001}}},
		{"no socket key", `http = { port = "auto" }`, []Port{{Name: "http"}}},
		{"beside plain ports", "http = { port = 8001, socket = true }\nmetrics = \"auto\"", []Port{{Name: "http", Base: 8001, Socket: true}, {Name: "metrics"}}},
		{"a sub-table", "[pools.email.service.ports.http]\nport = 9000\nsocket = true", []Port{{Name: "http", Base: 9000, Socket: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, svc("[pools.email.service.ports]\n"+tc.ports+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Pools["email"].Service.Ports; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ports %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestServiceSocketProblems(t *testing.T) {
	ports := func(group int, lines string) string {
		return svc("[pools.email.service]\ngroup_size = " + string(rune('0'+group)) + "\n[pools.email.service.ports]\n" + lines + "\n")
	}
	for _, tc := range []struct {
		name, text, key, msg string
	}{
		{"socket not a boolean", ports(1, `http = { port = "auto", socket = "yes" }`), "pools.email.service.ports.http.socket", "must be a boolean"},
		{"port missing", ports(1, `http = { socket = true }`), "pools.email.service.ports.http.port", "missing"},
		{"unknown key", ports(1, `http = { port = "auto", sockt = true }`), "pools.email.service.ports.http.sockt", "unknown key (want port, socket)"},
		{"port word in a table", ports(1, `http = { port = "any", socket = true }`), "pools.email.service.ports.http.port", `must be "auto" or a base port number`},
		{"port out of range in a table", ports(1, `http = { port = 70000, socket = true }`), "pools.email.service.ports.http.port", "70000 is not a port number"},
		{"fixed range past 65535 in a table", ports(1, `http = { port = 65530, socket = true }`), "pools.email.service.ports.http.port", "the fixed range 65530-65539"},
		{"with a gang group", ports(2, `http = { port = "auto", socket = true }`), "pools.email.service.ports.http.socket", "replicas of one unit: group_size is 2"},
		{"two socket ports", ports(1, "admin = { port = 9000, socket = true }\nhttp = { port = 8000, socket = true }"), "pools.email.service.ports.http.socket", `port "admin" is socket-activated already`},
		{"a port of another type", ports(1, `http = true`), "pools.email.service.ports.http", `must be "auto", an integer (a base port) or a table`},
		{"overlap of a socket port", ports(1, "http = { port = 8000, socket = true }\nmetrics = 8005"), "pools.email.service.ports.metrics", "overlaps pools.email.service.ports.http's 8000-8009"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, tc.text, tc.key, tc.msg)
		})
	}
}

// The effective configuration writes a socket port back as a table that
// loads to the same port.
func TestServiceSocketEffective(t *testing.T) {
	c, err := load(t, svc("[pools.email.service.ports]\nhttp = { port = 8001, socket = true }\nmetrics = \"auto\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	again, effective := reloadEffective(t, c)
	if got, want := again.Pools["email"].Service.Ports, c.Pools["email"].Service.Ports; !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: ports %+v, want %+v\n%s", got, want, effective)
	}
	// Writing the user out makes it explicit, the one expected difference.
	if diff := Diff(c.Pools["email"], again.Pools["email"]); slices.ContainsFunc(diff, func(k string) bool { return strings.HasPrefix(k, "service") }) {
		t.Errorf("Diff after a round trip: %v", diff)
	}
}
