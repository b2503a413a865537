package config

import (
	"os"
	"path/filepath"
	"slices"
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

func TestCheckCPUSet(t *testing.T) {
	c, err := load(t, svc("[pools.email.service]\ngroup_size = 2\ncpuset_split = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	saved := cgroupRoot
	defer func() { cgroupRoot = saved }()
	for _, tc := range []struct {
		name, dir, controllers string // "" = no file
		want                   string
	}{
		{"cpuset", "", "cpuset cpu io memory pids\n", ""},
		{"no cpuset", "", "cpu io memory pids\n", "has no cpuset controller"},
		{"hybrid", "unified", "\n", "unified/cgroup.controllers lists: )"},
		{"no cgroup2", "", "", "cannot read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cgroupRoot = t.TempDir()
			if tc.controllers != "" {
				if err := os.MkdirAll(filepath.Join(cgroupRoot, tc.dir), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(cgroupRoot, tc.dir, "cgroup.controllers"), []byte(tc.controllers), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ws := CheckCPUSet(c)
			if tc.want == "" {
				if len(ws) != 0 {
					t.Errorf("warnings %v", ws)
				}
				return
			}
			if len(ws) != 1 || ws[0].Key != "pools.email.service.cpuset_split" || ws[0].File != c.Path || !strings.Contains(ws[0].Msg, tc.want) {
				t.Errorf("warnings %v, want one on cpuset_split saying %q", ws, tc.want)
			}
		})
	}
	// The daemon sees it at start and reload, through CheckMachine.
	cgroupRoot = t.TempDir()
	if _, ws := CheckMachine(c); !slices.ContainsFunc(ws, func(p Problem) bool { return p.Key == "pools.email.service.cpuset_split" }) {
		t.Errorf("CheckMachine warnings %v lack cpuset_split", ws)
	}
	// A pool that does not split is not judged.
	c.Pools["email"].Service.CPUSetSplit = false
	cgroupRoot = t.TempDir()
	if ws := CheckCPUSet(c); ws != nil {
		t.Errorf("warnings without cpuset_split: %v", ws)
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
