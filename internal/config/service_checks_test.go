package config

import (
	"strings"
	"testing"
)

// Outputs of two pools, or a template over the pool's own discovery file,
// are refused: each write would undo the other.
func TestServiceOutputClashes(t *testing.T) {
	web := func(dest string) string {
		return "[pools.web]\nexec = [\"/bin/web\"]\n[pools.web.source]\npath = \"/var/lib/w.db\"\n" +
			"[[pools.web.service.template]]\nsource = \"TESTDATA/plain.tmpl\"\ndestination = \"" + dest + "\"\n"
	}
	email := svc("[[pools.email.service.template]]\nsource = \"TESTDATA/plain.tmpl\"\ndestination = \"/etc/up.conf\"\n")
	for _, tc := range []struct{ name, text, want string }{
		{"two pools' templates", email + web("/etc/up.conf"), "pools.web.service.template[0].destination: /etc/up.conf is also written for pool email"},
		{"another pool's JSON", email + web("/run/flexiq-scaled/discovery/email.json"), "pools.web.service.template[0].destination: /run/flexiq-scaled/discovery/email.json is also written for pool email"},
		{"own file_sd", email + web("/run/flexiq-scaled/discovery/web.file_sd.json"), "pools.web.service.template[0].destination: /run/flexiq-scaled/discovery/web.file_sd.json is this pool's own discovery file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, withTestdata(t, tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := load(t, withTestdata(t, email+web("/etc/web.conf"))); err != nil {
		t.Errorf("distinct outputs refused: %v", err)
	}
}

// probe.Spec.Validate's messages become a problem on the key they name.
func TestProbeProblem(t *testing.T) {
	const rk = "pools.web.service.readiness"
	for _, tc := range []struct{ in, key, msg string }{
		{`port = "grpc": not declared in the pool's ports ["http"]`, rk + ".port", `"grpc": not declared in the pool's ports ["http"]`},
		{`port: missing; name one of the pool's ports ["http"]`, rk + ".port", `missing; name one of the pool's ports ["http"]`},
		{`kind = "x": unknown`, rk + ".type", `"x": unknown`},
		{"odd", rk, "odd"},
		{": odd", rk, ": odd"},
	} {
		if key, msg := probeProblem(rk, tc.in); key != tc.key || msg != tc.msg {
			t.Errorf("probeProblem(%q) = %q, %q; want %q, %q", tc.in, key, msg, tc.key, tc.msg)
		}
	}
}

// Issue 27, item 6: every output is compared with every other, whatever
// the order the pools are read in. Pool email's template writing pool
// web's discovery file was let through, since email is checked first;
// a restarted daemon would then read the template's output as web's
// ready replicas.
func TestServiceOutputClashesAllWithAll(t *testing.T) {
	web := "[pools.web]\nexec = [\"/bin/web\"]\n[pools.web.source]\npath = \"/var/lib/w.db\"\n" +
		"[pools.web.service]\nmetrics_port = \"metrics\"\n[pools.web.service.ports]\nmetrics = \"auto\"\n"
	tmpl := func(pool, dest string) string {
		return "[[pools." + pool + ".service.template]]\nsource = \"TESTDATA/plain.tmpl\"\ndestination = \"" + dest + "\"\n"
	}
	for _, tc := range []struct{ name, text, want string }{
		{"earlier pool's template over a later pool's JSON", pool("") + tmpl("email", "/run/flexiq-scaled/discovery/web.json") + web,
			"pools.email.service.template[0].destination: /run/flexiq-scaled/discovery/web.json is also written for pool web (its discovery file, pools.web.service.discovery_dir"},
		{"earlier pool's template over a later pool's file_sd", pool("") + tmpl("email", "/run/flexiq-scaled/discovery/web.file_sd.json") + web,
			"pools.email.service.template[0].destination: /run/flexiq-scaled/discovery/web.file_sd.json is also written for pool web (its discovery file"},
		{"later pool's discovery_dir under an earlier pool's template", pool("") + tmpl("email", "/srv/d/web.json") +
			strings.Replace(web, "[pools.web.service]\n", "[pools.web.service]\ndiscovery_dir = \"/srv/d\"\n", 1),
			"pools.email.service.template[0].destination: /srv/d/web.json is also written for pool web"},
		{"two templates name both keys", pool("") + tmpl("email", "/etc/up.conf") + web + tmpl("web", "/etc/up.conf"),
			"pools.web.service.template[0].destination: /etc/up.conf is also written for pool email (pools.email.service.template[0].destination"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, withTestdata(t, tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
