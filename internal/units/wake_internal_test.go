package units

import (
	"strings"
	"testing"
)

// The wake address's units (issue 29): the socket listens where the
// configuration says, in the pool's slice, and its service runs the wake
// process with no capabilities; a bad address is refused before D-Bus.
func TestWakeSpecProperties(t *testing.T) {
	s := WakeSpec{Pool: "web", Listen: "127.0.0.1:18080", Exec: []string{"/usr/bin/flexiq-scaled", "wake", "web"}}
	sock, svc, err := s.properties()
	if err != nil {
		t.Fatal(err)
	}
	find := func(list []propLike, name string) string {
		for _, p := range list {
			if p.Name == name {
				return p.Value.String()
			}
		}
		return "<unset>"
	}
	var sp, vp []propLike
	for _, p := range sock {
		sp = append(sp, propLike{p.Name, p.Value})
	}
	for _, p := range svc {
		vp = append(vp, propLike{p.Name, p.Value})
	}
	for _, c := range []struct{ got, want string }{
		{find(sp, "Listen"), `[("Stream", "127.0.0.1:18080",)]`},
		{find(sp, "Slice"), `"flexiq-web.slice"`},
		{find(vp, "Slice"), `"flexiq-web.slice"`},
		{find(vp, "CapabilityBoundingSet"), "@t 0"},
		{find(vp, "ProtectSystem"), `"strict"`},
		{find(vp, "DynamicUser"), "true"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
	if d := find(sp, "Description"); !strings.Contains(d, "/usr/bin/flexiq-scaled wake web") {
		t.Errorf("the description %s does not carry the command line, so a changed one would be adopted", d)
	}
	if WakeSocketName("web") != "flexiq-web-wake.socket" || WakeServiceName("web") != "flexiq-web-wake.service" {
		t.Error("unit names")
	}
	if got := WakeServiceCgroup("web"); got != "/flexiq.slice/flexiq-web.slice/flexiq-web-wake.service" {
		t.Errorf("the wake service's cgroup: %s", got)
	}
	for _, bad := range []WakeSpec{{Pool: "web", Listen: "localhost:80", Exec: s.Exec}, {Pool: "web", Listen: "127.0.0.1:0", Exec: s.Exec}, {Pool: "web", Listen: "127.0.0.1:80"}} {
		if _, _, err := bad.properties(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

type propLike struct {
	Name  string
	Value interface{ String() string }
}
