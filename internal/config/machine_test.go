package config

import (
	"slices"
	"strings"
	"testing"
)

func keys(ps []Problem) []string {
	var ks []string
	for _, p := range ps {
		ks = append(ks, p.Key)
	}
	return ks
}

func TestAccountNames(t *testing.T) {
	// What systemd 252 takes in User= (measured with StartTransientUnit),
	// whether or not the name exists.
	for _, good := range []string{"nobody", "a b", "a.b", "a@b", "-x", "üser", "1abc", "4711"} {
		if _, err := load(t, pool("user = "+tomlString(good)+"\ngroup = "+tomlString(good))); err != nil {
			t.Errorf("user %q refused: %v", good, err)
		}
	}
	// ... and what it refuses as an invalid setting.
	for _, bad := range []string{"", ".", "..", "a:b", "a/b", " x", "x ", "a\tb", "a\nb"} {
		for _, field := range []string{"user", "group"} {
			_, err := load(t, pool(field+" = "+tomlString(bad)))
			if err == nil {
				t.Errorf("%s %q accepted", field, bad)
				continue
			}
			if ps := problems(t, err); len(ps) != 1 || ps[0].Key != "pools.email."+field {
				t.Errorf("%s %q: %v", field, bad, ps)
			}
		}
	}
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\x00", `\u0000`)
	return `"` + r.Replace(s) + `"`
}

func TestNewKeys(t *testing.T) {
	c, err := load(t, pool(`
environment_file = ["/etc/myapp/email.env", "-/etc/myapp/local.env"]
hardening = "strict"
max_surge = 3`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pools["email"]
	if want := []string{"/etc/myapp/email.env", "-/etc/myapp/local.env"}; !slices.Equal(p.EnvironmentFiles, want) {
		t.Errorf("EnvironmentFiles = %q, want %q", p.EnvironmentFiles, want)
	}
	if p.Hardening != "strict" || p.MaxSurge != 3 {
		t.Errorf("Hardening, MaxSurge = %q, %d", p.Hardening, p.MaxSurge)
	}
	c, err = load(t, pool(`environment_file = "-/etc/myapp/email.env"`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"-/etc/myapp/email.env"}; !slices.Equal(c.Pools["email"].EnvironmentFiles, want) {
		t.Errorf("a single file: %q", c.Pools["email"].EnvironmentFiles)
	}
	c, err = load(t, pool(`environment_file = []`))
	if err != nil || c.Pools["email"].EnvironmentFiles != nil {
		t.Errorf("an empty list: %v, %q", err, c.Pools["email"].EnvironmentFiles)
	}

	for _, tc := range []struct{ extra, key, msg string }{
		{`environment_file = "etc/x.env"`, "environment_file", "must be an absolute path"},
		{`environment_file = "-x.env"`, "environment_file", "must be an absolute path"},
		{`environment_file = ["/a.env", 3]`, "environment_file", "element 2 must be a string"},
		{`environment_file = 3`, "environment_file", "must be a string or an array of strings, not an integer"},
		{`environment_file = "/a\nb.env"`, "environment_file", "control characters"},
		{`hardening = "paranoid"`, "hardening", `unknown preset "paranoid"`},
		{`hardening = true`, "hardening", "must be a string"},
		{`max_surge = 0`, "max_surge", "must be >= 1"},
		{`max_surge = 1.5`, "max_surge", "must be an integer"},
		{`exec = ["bin/worker"]`, "exec", "must be an absolute path, or a plain file name"},
		{`exec = [".."]`, "exec", "must be an absolute path, or a plain file name"},
	} {
		text := pool(tc.extra)
		if strings.HasPrefix(tc.extra, "exec") {
			text = strings.Replace(text, `app = "myapp.tasks:queue"`+"\n", "", 1)
		}
		_, err := load(t, text)
		if err == nil {
			t.Errorf("%s: accepted", tc.extra)
			continue
		}
		ps := problems(t, err)
		if len(ps) != 1 || ps[0].Key != "pools.email."+tc.key || !strings.Contains(ps[0].Msg, tc.msg) {
			t.Errorf("%s: %v; want one problem at %s containing %q", tc.extra, ps, tc.key, tc.msg)
		}
	}
}

func TestHiddenSourcePaths(t *testing.T) {
	for path, why := range map[string]string{
		"/tmp/flexiq.db":               "PrivateTmp=yes, so it sees its own empty /tmp",
		"/var/tmp/q/flexiq.db":         "PrivateTmp=yes, so it sees its own empty /var/tmp",
		"/home/alice/queue/flexiq.db":  "ProtectHome=tmpfs, so it sees an empty /home",
		"/root/flexiq.db":              "ProtectHome=tmpfs, so it sees an empty /root",
		"/run/user/1000/flexiq.db":     "ProtectHome=tmpfs, so it sees an empty /run/user",
		"/var/lib/../../tmp/flexiq.db": "PrivateTmp=yes",
		"/tmp":                         "PrivateTmp=yes",
	} {
		_, err := load(t, withSource(`path = "`+path+`"`))
		if err == nil {
			t.Errorf("%s accepted", path)
			continue
		}
		ps := problems(t, err)
		if len(ps) != 1 || ps[0].Key != "pools.email.source.path" || !strings.Contains(ps[0].Msg, why) ||
			!strings.Contains(ps[0].Msg, "/var/lib/flexiq") {
			t.Errorf("%s: %v; want the reason %q and a place to use instead", path, ps, why)
		}
	}
	for _, path := range []string{"/var/lib/flexiq/flexiq.db", "/tmpfs/flexiq.db", "/homes/flexiq.db", "/run/flexiq/q.db", "/srv/root/q.db"} {
		if _, err := load(t, withSource(`path = "`+path+`"`)); err != nil {
			t.Errorf("%s refused: %v", path, err)
		}
	}
}

// Names that would escape or alter a unit name are refused at load.
func TestPoolNamesThatCouldInject(t *testing.T) {
	for _, name := range []string{
		"a/b", "..", ".", "a..b", "a@1", "a\nb", "a-b", "-", "émail", "Email", "", strings.Repeat("a", 33),
		"a b", "a.service", "a\x00b", "a\\x2db", "a%ib", "$x", "a:b",
	} {
		text := "[pools." + tomlString(name) + "]\nexec = [\"/bin/true\"]\n[pools." + tomlString(name) + ".source]\npath = \"/var/lib/flexiq/q.db\"\n"
		c, err := load(t, text)
		if err == nil {
			t.Errorf("pool name %q accepted: %v", name, c.Pools)
			continue
		}
		ps := problems(t, err)
		if len(ps) != 1 || !strings.Contains(ps[0].Msg, "pool name must match [a-z0-9_]{1,32}") || !strings.Contains(ps[0].Msg, "unit names") {
			t.Errorf("pool name %q: %v", name, ps)
		}
	}
	for _, name := range []string{"a", "email_2", strings.Repeat("z", 32), "0"} {
		text := "[pools." + tomlString(name) + "]\nexec = [\"/bin/true\"]\n[pools." + tomlString(name) + ".source]\npath = \"/var/lib/flexiq/q.db\"\n"
		if _, err := load(t, text); err != nil {
			t.Errorf("pool name %q refused: %v", name, err)
		}
	}
}
